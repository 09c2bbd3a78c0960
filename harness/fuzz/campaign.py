"""A fuzzing campaign: Hypothesis draws models (``harness.fuzz.draw``), each
is checked on every path against float64 as ``python -m equivalence
--model`` checks a file, and what disagrees is shrunk, classified, named
and kept (``harness.fuzz.findings``).

- **Workers stay up.**  One ``equivalence.check.Checker`` holds a worker
  per path (every mode included) and the float64 and float32 reference
  runs for the whole campaign: a drawn model costs seconds, not a
  framework's import.  A worker that dies (a crash, a timeout) is a finding
  of its own, and the checker is started again.
- **Shrinking.**  A new finding raises an exception of its own class
  (``_raised``), so Hypothesis shrinks each finding apart (its "multiple
  bugs"): fewer layers, smaller sizes, fewer steps.  The smallest model
  seen for a finding is appended to the findings file whenever a smaller
  one shows it, and every model that shows it to the sightings file
  (``harness.fuzz.findings``: how often, with which optimizers), so Ctrl-C
  or a crash keeps what was found.
- **Rounds and resuming.**  Hypothesis stops drawing soon after it finds a
  bug, so a campaign is rounds of ``ROUND`` models until the budget is
  spent.  Hypothesis' database (``<folder>/hypothesis``) replays the
  failing draws of earlier rounds and campaigns first, so a finding whose
  model shrank in a round shrinks further in the next; once a round leaves
  it as it was, or when it was in the findings file before the campaign
  started, it is settled: counted when seen again, never raised (not
  reported twice, not shrunk again).
- **Hypothesis' files.**  Hypothesis keeps more than its database: a
  cache of the constants in the code it runs (``constants/``), by default
  in ``.hypothesis`` of the current folder, which a campaign run from a
  project or home folder would litter.  While a campaign runs, Hypothesis'
  home is the campaign's ``<folder>/hypothesis``, beside its database.
- **Budget.**  Past the deadline the next draw ends the round at once, its
  shrinking too (the findings file has the smallest model seen so far).
  One finding's shrinking gets ``SHRINK_CHECKS`` checks in a campaign;
  then it is settled as it is and the round ends, so that time goes to new
  models.
- **Known bugs are not shrunk.**  A finding whose every failing path the
  check names as a known Keras bug (``Outcome.known``: its page and
  reproducer exist) is settled at its first model: counted when seen
  again, never shrunk or cut.  Every Nadam model fails on Keras' PyTorch
  backend, at a new place each time (a signature of its own): shrinking
  each for ``SHRINK_CHECKS`` checks spent most of a 10-minute campaign on
  bugs already written up (docs/results/fuzz/README.md).
- **Checked once.**  Each round starts Hypothesis again, which draws its
  simplest models first and replays the database's failing draws, and
  shrinking tries a model more than once: a model (with its case) checked
  before in the campaign is not checked again, its outcome remembered
  (in one 10-minute campaign, 12 of 37 checks repeated an earlier model's
  layer kinds, optimizer and case: docs/results/fuzz/README.md).  Not
  counted as a model or a sighting again.
- **Cutting the front.**  Once a finding is settled, its model's first
  layer is left out while the finding still shows (``Campaign.cut_front``):
  Hypothesis draws the input shape before the layers, so it cannot start a
  model where its first layer ended (a convolution that made the 4x5 input
  on which a padded pool shows its bug).
"""

from __future__ import annotations

import dataclasses
import json
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Unsatisfiable

from harness.fuzz.draw import Drawn, cut_first_layer, drawn_models
from harness.fuzz.findings import (
    Finding,
    Outcome,
    classify,
    finding_id,
    keep,
    outcome_line,
    read_findings,
    sighted,
    signature,
    size,
)
from workers.paths import MODE_PATHS

# Models a round draws at most (Hypothesis stops sooner once it finds one).
ROUND = 40
# Checks one finding's shrinking may take before it is settled as it is and
# the round ends: shrinking is a check per candidate, and a campaign's time
# is better spent drawing new models (measured: unbounded, the hour's
# campaign spent most of its checks shrinking rounding noise).
SHRINK_CHECKS = 30
Check = Callable[[Drawn], Outcome]


class _Spent(BaseException):
    """The budget, or one finding's shrinking budget, is spent: ends a round
    at once (a ``BaseException``, so Hypothesis neither shrinks nor replays
    it)."""


class Found(Exception):  # noqa: N818 (what a drawn model did: found something)
    """A drawn model showed a finding (each signature its own subclass)."""


_CLASSES: dict[str, type[Found]] = {}


def _raised(text: str) -> type[Found]:
    """The exception class of one signature, made once: Hypothesis tells
    bugs apart by their exception's class, and shrinks each on its own."""
    if text not in _CLASSES:
        _CLASSES[text] = type(f"Found_{finding_id(text)}", (Found,), {})
    return _CLASSES[text]


@dataclass
class Tally:
    """What a campaign did: models drawn and checked, the seconds spent
    checking them, the findings new in it and those seen again."""

    models: int = 0
    checking_s: float = 0.0
    new: list[str] = field(default_factory=list)
    again: dict[str, int] = field(default_factory=dict)
    interrupted: bool = False

    @property
    def rate(self) -> float:
        """Seconds per drawn model (checking only)."""
        return self.checking_s / self.models if self.models else 0.0


class Campaign:
    """One campaign in ``folder`` (findings file, Hypothesis database) for
    ``budget_s`` seconds; ``check`` checks one drawn model (the workers'
    ``Checker``, or a stand-in in tests); ``say`` prints a line; ``clock``
    reads seconds (a test's own); ``draw_seed`` fixes the draws (a test's;
    ``None``: new ones each campaign)."""

    def __init__(
        self,
        folder: Path,
        budget_s: float,
        check: Check,
        *,
        say: Callable[[str], None] = print,
        clock: Callable[[], float] = time.monotonic,
        round_size: int = ROUND,
        draw_seed: int | None = None,
        shrink_checks: int = SHRINK_CHECKS,
    ) -> None:
        self.folder = folder
        self.check = check
        self.say = say
        self.clock = clock
        self.start = clock()
        self.deadline = self.start + budget_s
        self.round_size = round_size
        # each round draws from its own seed (``draw_seed`` + its number): a
        # test's campaign is the same every time, a user's is new each time
        self.draw_seed = time.time_ns() % 2**32 if draw_seed is None else draw_seed
        self.rounds = 0
        self.shrink_checks = shrink_checks
        self.raised: dict[str, int] = {}  # checks that showed each finding
        self.findings = read_findings(folder)
        self.earlier = set(self.findings)  # found by earlier campaigns
        # shrunk already (earlier, or in a finished round): counted when
        # seen again, never raised, so the next round draws anew
        self.settled = set(self.findings)
        self.known: set[str] = set()  # named as known Keras bugs: never shrunk
        self.outcomes: dict[str, Outcome] = {}  # by ``_case``: checked once
        self.tally = Tally()

    def over(self) -> bool:
        return self.clock() >= self.deadline

    def run(self) -> Tally:
        """Rounds until the budget is spent; Ctrl-C ends it, keeping every
        finding (the file has them already)."""
        home = self.folder / "hypothesis"
        database = DirectoryBasedExampleDatabase(str(home))
        set_hypothesis_home_dir(home)  # not the current folder's .hypothesis
        try:
            while not self.over():
                before = {i: self._size(f) for i, f in self.findings.items()}
                settled = set(self.settled)
                self._round(database)
                # a finding whose smallest model did not shrink this round is
                # settled; one that did is shrunk further by the next round
                # (Hypothesis replays it first from its database)
                self.settled |= {
                    i
                    for i, f in self.findings.items()
                    if before.get(i) == self._size(f)
                }
                # what Hypothesis cannot shrink, once it is done with it
                for ident in sorted(self.settled - settled - self.earlier - self.known):
                    self.cut_front(ident)
        except KeyboardInterrupt:
            self.tally.interrupted = True
            self.say("interrupted: the findings so far are kept")
        finally:
            set_hypothesis_home_dir(None)  # Hypothesis' own default again
        return self.tally

    def _round(self, database: DirectoryBasedExampleDatabase) -> None:
        self.rounds += 1

        @seed(self.draw_seed + self.rounds)
        @settings(
            database=database,
            derandomize=False,
            max_examples=self.round_size,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            report_multiple_bugs=True,
            phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
            verbosity=Verbosity.quiet,
            print_blob=False,
        )
        @given(drawn_models())
        def fuzz_models(drawn: Drawn) -> None:
            self._one(drawn)

        try:
            fuzz_models()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            if not _only(exc, (_Spent, Unsatisfiable, Found)):
                if not isinstance(exc, Exception):
                    raise  # SystemExit and the like are not the round's
                self.say(f"round ended: {type(exc).__name__}: {str(exc)[:200]}")

    def _one(self, drawn: Drawn) -> None:
        if self.over():
            raise _Spent
        ident, text = self._checked(drawn)
        if not ident or ident in self.settled:
            return  # nothing, or shrunk already: counted, not raised
        self.raised[ident] = self.raised.get(ident, 0) + 1
        if self.raised[ident] > self.shrink_checks:
            self.settled.add(ident)  # shrunk enough: on to new models
            raise _Spent
        raise _raised(text)(text)

    def _checked(self, drawn: Drawn) -> tuple[str, str]:
        """Check ``drawn``, count it, say it, and keep it when it shows a
        finding with a model no bigger than the finding's; its finding's id
        and signature (empty when every path agrees).  A model checked
        before in this campaign is not checked again: its outcome is
        remembered (module docstring)."""
        case = _case(drawn)
        if case in self.outcomes:
            text = signature(self.outcomes[case]) if self.outcomes[case].found else ""
            return (finding_id(text), text) if text else ("", "")
        began = self.clock()
        outcome = self.check(drawn)
        self.tally.checking_s += self.clock() - began
        self.tally.models += 1
        if not outcome.tool:  # the tool's own crash may not happen again
            self.outcomes[case] = outcome
        text = signature(outcome) if outcome.found else ""
        self.say(self._progress(drawn, outcome, text))
        if not text:
            return "", ""
        ident = finding_id(text)
        if outcome.known and ident not in self.known:
            self.known.add(ident)  # its page exists: not shrunk (docstring)
            self.settled.add(ident)
        optimizer = drawn.document["workload"]["optimizer"]
        known = self.findings.get(ident)
        layers = len(drawn.document["layers"])
        new = known is None
        if known is None or size(drawn.document, drawn.steps, drawn.batch_size) <= size(
            known.document, known.steps, known.batch_size
        ):
            found = Finding(
                id=ident,
                signature=text,
                kind=classify(outcome),
                document=drawn.document,
                seed=drawn.seed,
                batch_size=drawn.batch_size,
                steps=drawn.steps,
                paths=list(outcome.verdicts),
                layers=layers,
                seen=(known.seen if known else 0) + 1,
                outcome=outcome_line(outcome),
                optimizers=sorted({*(known.optimizers if known else []), optimizer}),
            )
            self.findings[ident] = found
            keep(self.folder, found)
            if new:
                self.tally.new.append(ident)
                label = (
                    " (a known Keras bug: not shrunk)" if ident in self.known else ""
                )
                self.say(f"NEW FINDING {ident}: {text} ({layers} layers){label}")
        else:
            known.seen += 1
            known.optimizers = sorted({*known.optimizers, optimizer})
        sighted(self.folder, ident, optimizer)  # every sighting, counted
        if ident in self.earlier:
            self.tally.again[ident] = self.tally.again.get(ident, 0) + 1
        return ident, text

    def cut_front(self, ident: str) -> None:
        """Shrink a settled finding where Hypothesis cannot: leave out its
        model's first layer and start from that layer's output shape
        (``harness.fuzz.draw.cut_first_layer``), again while the smaller
        model still shows the same finding (it is then kept as the
        finding's)."""
        while not self.over():
            finding = self.findings[ident]
            document = cut_first_layer(finding.document)
            if document is None:
                return
            modes = tuple(p for p in finding.paths if p in MODE_PATHS)
            case = (finding.seed, finding.batch_size, finding.steps, modes)
            if self._checked(Drawn(document, *case))[0] != ident:
                return
            self.say(
                f"CUT {ident}: its first layer left out, the model starts at "
                f"{tuple(document['input_shape'])} ({len(document['layers'])} layers)"
            )

    @staticmethod
    def _size(finding: Finding) -> tuple[int, ...]:
        return size(finding.document, finding.steps, finding.batch_size)

    def _progress(self, drawn: Drawn, outcome: Outcome, text: str) -> str:
        elapsed = self.clock() - self.start
        left = max(0.0, self.deadline - self.clock())
        kinds = ",".join(e["kind"] for e in drawn.document["layers"])
        w = drawn.document["workload"]
        verdict = text or "every path agrees"
        return (
            f"[{_clock(elapsed)} elapsed, {_clock(left)} left; model "
            f"{self.tally.models}, {self.tally.rate:.1f} s each; "
            f"{len(self.findings)} findings] {kinds} | {w['optimizer']} b"
            f"{drawn.batch_size} s{drawn.steps}"
            f"{' +' + ','.join(drawn.modes) if drawn.modes else ''}: {verdict}"
        )


def _case(drawn: Drawn) -> str:
    """What a check depends on: the model and its case, as one string."""
    return json.dumps(dataclasses.asdict(drawn), sort_keys=True)


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:02d}:{secs:02d}"


def _only(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> bool:
    """Whether ``exc`` is one of ``kinds``, or a group of nothing else: how a
    round ends as it should (findings, the budget spent, nothing left to
    draw), also when Hypothesis was shrinking several findings when the
    budget ran out and raises the group of them (found by a 20-minute
    campaign that ended in a traceback)."""
    if isinstance(exc, kinds):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_only(e, kinds) for e in exc.exceptions)
    return False


def crashed(exc: BaseException) -> Outcome:
    """The outcome of a check that raised in the tool itself: the tool's
    bug, named by the exception's type and where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{Path(frames[-1].filename).stem}.{frames[-1].name}" if frames else "?"
    return Outcome(verdicts={}, tool=f"{type(exc).__name__} in {where}: {exc}")
