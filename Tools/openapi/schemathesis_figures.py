"""The figures of a schemathesis run, from its NDJSON event log (`--report ndjson`): operations
tested, test cases generated, requests sent, failed checks, and per operation the statuses the
server answered — so that a run that only ever got 400s is seen for what it is.

    python3 Tools/openapi/schemathesis_figures.py events.ndjson
"""

import collections
import json
import sys


def main(path):
    cases = collections.Counter()
    requests = 0
    statuses = collections.defaultdict(collections.Counter)
    checks = 0
    failures = collections.Counter()
    with open(path, encoding="utf-8") as events:
        for line in events:
            event = json.loads(line)
            finished = event.get("ScenarioFinished")
            if not finished:
                continue
            recorder = finished.get("recorder", {})
            label = recorder.get("label", "?")
            cases[label] += len(recorder.get("cases", {}))
            for interaction in recorder.get("interactions", {}).values():
                requests += 1
                response = interaction.get("response") or {}
                statuses[label][response.get("status_code", "no answer")] += 1
            for results in recorder.get("checks", {}).values():
                for check in results:
                    checks += 1
                    if check.get("status") == "failure":
                        failures[(label, check.get("name", "?"))] += 1
    tested = sorted(label for label, count in cases.items() if count > 0)
    # The stateful phase records its sequences of calls under one label of its own.
    operations = [label for label in tested if not label.startswith("Stateful")]
    print("schemathesis figures:")
    print(f"  operations tested: {len(operations)}")
    print(f"  test cases generated: {sum(cases.values())}")
    print(f"  requests sent: {requests}")
    print(f"  checks run: {checks}")
    print(f"  failed checks: {sum(failures.values())} ({len(failures)} distinct operation/check pairs)")
    for (label, name), count in sorted(failures.items()):
        print(f"    {label}: {name} x{count}")
    print("  answers by operation (status: count; the stateful phase's sequences together):")
    for label in tested:
        answered = ", ".join(f"{status}: {count}" for status, count in sorted(statuses[label].items(), key=lambda item: str(item[0])))
        print(f"    {label}: {answered}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
