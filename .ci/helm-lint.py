#!/usr/bin/env python3
"""Lints charts/kai-scheduler with the real Helm library (helm-sdkpy bundles it), as shipped
and with every optional block switched on, and fails on any warning or error.

helm-sdkpy's lint reads only the chart's own values.yaml, so each variant is a copy of the chart
whose values.yaml has the variant's values merged in. Helm's lint reports where a problem is
(file, severity) but the binding drops the message text: run `helm lint` on the printed copy
to read it.
"""
import asyncio
import copy
import pathlib
import shutil
import sys
import tempfile

import helm_sdkpy
import yaml

CHART = pathlib.Path(__file__).resolve().parent.parent / "charts" / "kai-scheduler"
SEVERITY = {0: "unknown", 1: "info", 2: "warning", 3: "error"}

VARIANTS = {
    "as shipped": {},
    "with a repository": {"policy": {"repository": "https://git.example.com/policy.git"}},
    "every option on": {
        "policy": {
            "repository": "ssh://git@git.example.com/policy.git",
            "credentialsSecret": "policy-git",
        },
        "applyQueues": True,
        "numa": {"enabled": True, "ignore": ["memory"]},
        "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "control-plane", "operator": "Exists"}],
        "podAnnotations": {"example.com/owner": "platform"},
    },
}


def merge(base, extra):
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def main():
    config = helm_sdkpy.Configuration(namespace="kai-system")
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in VARIANTS.items():
            chart = pathlib.Path(tmp) / name.replace(" ", "-") / "kai-scheduler"
            shutil.copytree(CHART, chart)
            (chart / "values.yaml").write_text(yaml.safe_dump(merge(values, extra)))
            result = asyncio.run(helm_sdkpy.Lint(config).run(str(chart)))
            problems = [m for m in result.get("Messages") or [] if m.get("Severity", 0) >= 2]
            if result.get("Errors") or problems:
                failed = True
                for m in problems:
                    sev = SEVERITY.get(m.get("Severity"), "?")
                    print(f"helm lint ({name}): {sev} in {m.get('Path')}", file=sys.stderr)
                if not problems:
                    print(f"helm lint ({name}): {len(result['Errors'])} error(s)", file=sys.stderr)
            else:
                print(f"helm lint ({name}): clean")
    if failed:
        print(f"the chart has lint problems; read them with `helm lint {CHART}`", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
