"""Conformance reports: totals, a table per operator and output type, every failure with its reason.

:class:`Report` aggregates :class:`~.runner.Outcome` records; :meth:`Report.markdown` is for people,
:meth:`Report.junit` for CI systems (one ``testsuite`` per operator, one ``testcase`` per test).
"""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Sequence

from .applicability import is_not_applicable
from .runner import Outcome


@dataclasses.dataclass
class Tally:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    not_applicable: int = 0  # not run: the device does not advertise what the test needs

    @property
    def run(self) -> int:
        return self.passed + self.failed

    def add(self, outcome: Outcome) -> None:
        if is_not_applicable(outcome):
            self.not_applicable += 1
        elif outcome.skipped:
            self.skipped += 1
        elif outcome.passed:
            self.passed += 1
        else:
            self.failed += 1

    def __str__(self) -> str:
        text = f"{self.passed} / {self.run}"
        notes = [f"{self.skipped} skipped"] if self.skipped else []
        notes += [f"{self.not_applicable} not applicable"] if self.not_applicable else []
        return text + (f" ({', '.join(notes)})" if notes else "")


def _types(outcome: Outcome) -> str:
    return ",".join(outcome.info.output_types) or "-"


@dataclasses.dataclass
class Report:
    device: str
    title: str
    outcomes: Sequence[Outcome]
    details: dict[str, str] = dataclasses.field(default_factory=dict)  # shown under the title

    def totals(self) -> dict[str, Tally]:
        """'positive' / 'negative' overall, then the same per extension ('base' = no extension)."""
        totals: dict[str, Tally] = defaultdict(Tally)
        for o in self.outcomes:
            kind = "negative" if o.info.negative else "positive"
            totals[kind].add(o)
            if o.info.profile:
                totals[f"{o.info.profile.removeprefix('tosa-')} {kind}"].add(o)
            for ext in o.info.extensions or ("base",):
                totals[f"{ext} {kind}"].add(o)
        return dict(totals)

    @property
    def ok(self) -> bool:
        return all(o.passed or o.skipped for o in self.outcomes)

    def rows(self) -> list[tuple[str, str, Tally, Tally]]:
        """(operator, output types, positive tally, negative tally), sorted."""
        table: dict[tuple[str, str], tuple[Tally, Tally]] = defaultdict(lambda: (Tally(), Tally()))
        for o in self.outcomes:
            table[(o.info.operator, _types(o))][1 if o.info.negative else 0].add(o)
        return [(op, types, pos, neg) for (op, types), (pos, neg) in sorted(table.items())]

    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.passed and not o.skipped]

    def markdown(self) -> str:
        totals = self.totals()
        lines = [f"# {self.title}", "", f"Device: `{self.device}`"]
        lines += [f"{key}: {value}" for key, value in self.details.items()]
        lines += ["", "## Totals", "", "| Tests | Passed / run |", "|---|---|"]
        for key in ("positive", "negative"):
            if key in totals:
                verb = "compliant" if key == "positive" else "rejected"
                lines.append(f"| {key} ({verb}) | {totals[key]} |")
        profiles = sorted({k.rsplit(" ", 1)[0] for k in totals if k.startswith("pro-")})
        if profiles:
            lines += ["", "### By profile", "", "| Profile | Positive compliant | Negative rejected |", "|---|---|---|"]
            for name in profiles:
                pos, neg = totals.get(f"{name} positive", Tally()), totals.get(f"{name} negative", Tally())
                lines.append(f"| {name.upper()} | {pos} | {neg} |")
        extensions = sorted(
            {k.rsplit(" ", 1)[0] for k in totals if " " in k and not k.startswith("pro-")},
            key=lambda e: (e != "base", e),
        )
        if extensions:
            lines += [
                "",
                "### By extension",
                "",
                "| Extension | Positive compliant | Negative rejected |",
                "|---|---|---|",
            ]
            for ext in extensions:
                pos, neg = totals.get(f"{ext} positive", Tally()), totals.get(f"{ext} negative", Tally())
                lines.append(f"| {ext} | {pos} | {neg} |")
        lines += ["", "## Operators", "", "| Operator | Output types | Positive | Negative |", "|---|---|---|---|"]
        for op, types, pos, neg in self.rows():
            mark = "" if not (pos.failed or neg.failed) else " ✗"
            lines.append(
                f"| {op}{mark} | {types} | {pos if pos.run or pos.skipped or pos.not_applicable else '-'} | "
                f"{neg if neg.run or neg.skipped or neg.not_applicable else '-'} |"
            )
        failures = self.failures()
        lines += ["", f"## Failures ({len(failures)})", ""]
        if not failures:
            lines.append("None.")
        for o in failures:
            first = o.message.strip().splitlines()[0] if o.message.strip() else "failed"
            lines.append(f"- `{o.info.path.name}` ({o.info.operator}, {_types(o)}): {first[:300]}")
        reasons = self.not_applicable_reasons()
        if reasons:
            lines += ["", f"## Not applicable ({sum(reasons.values())}, not run)", ""]
            lines += ["| Reason | Tests |", "|---|---|"]
            lines += [f"| {why} | {count} |" for why, count in reasons.most_common()]
        return "\n".join(lines) + "\n"

    def not_applicable_reasons(self) -> Counter[str]:
        """Why tests were not run, with tensor names and operator positions left out so alike reasons
        count together."""
        reasons: Counter[str] = Counter()
        for o in self.outcomes:
            if is_not_applicable(o):
                why = o.message.split(":", 1)[-1].strip()
                why = re.sub(r"operator #\d+ ", "", re.sub(r"'[^']*'", "X", why))
                reasons[why.replace("|", "/")] += 1
        return reasons

    def junit(self) -> bytes:
        root = ET.Element("testsuites", {"name": self.title})
        by_op: dict[str, list[Outcome]] = defaultdict(list)
        for o in self.outcomes:
            by_op[o.info.operator].append(o)
        for op, outcomes in sorted(by_op.items()):
            failed = sum(1 for o in outcomes if not o.passed and not o.skipped)
            skipped = sum(1 for o in outcomes if o.skipped)
            suite = ET.SubElement(
                root,
                "testsuite",
                {
                    "name": op,
                    "tests": str(len(outcomes)),
                    "failures": str(failed),
                    "skipped": str(skipped),
                    "time": f"{sum(o.seconds for o in outcomes):.3f}",
                },
            )
            for o in outcomes:
                case = ET.SubElement(
                    suite,
                    "testcase",
                    {"classname": f"tosa.{op.lower()}", "name": o.info.path.name, "time": f"{o.seconds:.3f}"},
                )
                if o.skipped:
                    ET.SubElement(case, "skipped", {"message": o.message[:500]})
                elif not o.passed:
                    failure = ET.SubElement(
                        case, "failure", {"message": o.message.splitlines()[0][:500] if o.message else "failed"}
                    )
                    failure.text = o.message
        ET.indent(root)
        return ET.tostring(root, encoding="utf-8", xml_declaration=True)
