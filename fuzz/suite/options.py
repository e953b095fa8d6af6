"""The run's --gdn-* options, declared once: each is a field of `Options` whose row (`Flag`, the field's metadata) says
its flag, what pytest parses it to, its bound, metavar, choices and help; the field gives its name, type and default.
pytest's registration (`register`) and the value the run reads (`Options.read`) both loop over the rows, so an option is
added, renamed or bounded in one place.

`Options.read` checks the value it builds, before the first example, each bad input one line (a ValueError, which the
plugin makes pytest's usage error): a count or time out of range, a file the run writes as it goes in a directory that
does not exist, a live log to resume that is not one, a seed that is no integer, a path the run writes that will not
do (fuzz.run.paths: a report that is a directory, a corpus-out that is a file), --gdn-sanitize where there is no
compute-sanitizer. This module imports nothing heavy (no torch, no Hypothesis): pytest registers these options in
every run where gdn-fuzz is installed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fuzz.model.known_bugs import MASK_POLICIES
from fuzz.run.kernel_cache import KernelCache
from fuzz.run.paths import unwritable_dir, unwritable_file
from fuzz.run.timeouts import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from fuzz.generate.profiles import Profile

ROW = "gdn-fuzz option"  # the key of a field's row in its metadata


@dataclass(frozen=True)
class Flag:
    """How pytest takes one --gdn-* option, and what bounds its value."""

    flag: str
    help: str
    parse: Callable | None = None  # pytest's type (int, float); None: the text as given
    action: str | None = None  # pytest's action: "store_true" (a switch), "append" (given once per value)
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    least: int | None = None  # the least value allowed (None: any) ...
    above: bool = False  # ... or the bound the value must pass, itself refused
    path: bool = False  # the value names a file or directory (an empty one names none)
    writes: bool = False  # a file the run writes as it goes: checked writable before the first example
    makes: bool = False  # a directory the run writes in (made where missing; "://" names a server, not checked)
    alias: tuple[str, str, str] | None = None  # (flag, value, help): a flag that gives this option that value

    @property
    def dest(self) -> str:
        """pytest's name for it (config.getoption's)."""
        return self.flag.removeprefix("--").replace("-", "_")

    def add_to(self, group, default) -> None:
        """Register it (and its alias) with a pytest option group."""
        given = {"action": self.action, "type": self.parse, "metavar": self.metavar, "choices": self.choices}
        extra = {key: value for key, value in given.items() if value is not None}
        group.addoption(self.flag, default=[] if self.action == "append" else default, help=self.help, **extra)
        if self.alias:
            flag, value, text = self.alias
            group.addoption(flag, action="store_const", const=value, dest=self.dest, help=text)

    def value(self, given):
        """The field's value for what pytest parsed."""
        if self.action == "append":
            return tuple(given)
        if self.path:
            return Path(given) if given else None
        return given

    def check(self, value) -> None:
        """A ValueError in one line when the value is out of its bound, or names a path the run cannot write."""
        if self.least is not None and value is not None and (value < self.least or value == self.least and self.above):
            raise ValueError(f"{self.flag}={value:g}: expected a number {'>' if self.above else '>='} {self.least}")
        why = None
        if self.writes and value:
            why = unwritable_file(Path(value))
        elif self.makes and value and "://" not in str(value):
            why = unwritable_dir(Path(value))
        if why:
            raise ValueError(f"{self.flag}={value}: {why}")


def option(default, flag: str, help: str, **row) -> dataclasses.Field:
    """A field of Options that a --gdn-* option sets: its default, and its row (Flag's fields)."""
    return field(default=default, metadata={ROW: Flag(flag, help, **row)})


@dataclass(frozen=True)
class Options:
    """What the user chose for this run, beside the profile: one field per --gdn-* option (in the order --help lists
    them), then what the run settles from elsewhere."""

    targets: tuple[str, ...] = option(
        (),
        "--gdn-target",
        action="append",
        metavar="FAMILY=module.path[:attr]",
        help="fuzz an importable module exposing a family's API (flashinfer, fla, sglang) instead of the installed "
        "library; it runs on the profile's device",
    )
    require: str = option(
        "",
        "--gdn-require",
        metavar="FAMILY,...",
        help="families that must be available: if one cannot be loaded, the run stops before it starts, with one line "
        "(a usage error); a target the loaded release or this GPU cannot run is still reported unavailable",
    )
    report: Path | None = option(
        None,
        "--gdn-report",
        path=True,
        writes=True,
        metavar="FILE.json",
        help="write the run report (examples per target and operation, unavailable targets and why, every distinct "
        "failure with its minimal coordinate, one record per example) as JSON; rewritten after every test",
    )
    corpus_out: Path | None = option(
        None,
        "--gdn-corpus-out",
        path=True,
        makes=True,
        metavar="DIR",
        help="write each distinct shrunk failure as a new corpus entry (JSON) into DIR (never over an existing one)",
    )
    corpus: Path | None = option(
        None,
        "--gdn-corpus",
        path=True,
        metavar="DIR",
        help="the corpus to replay (default: the checkout's or the installed package's corpus)",
    )
    shards: int = option(
        1,
        "--gdn-shards",
        parse=int,
        least=1,
        metavar="K",
        help="run each fuzz test as K shards (own seeds and time boxes), so pytest-xdist has K times the tests to "
        "spread over its workers",
    )
    examples: int | None = option(
        None,
        "--gdn-examples",
        parse=int,
        least=1,
        metavar="N",
        help="examples per fuzz test (default: the profile's)",
    )
    test_seconds: float | None = option(
        None,
        "--gdn-test-seconds",
        parse=float,
        least=0,
        above=True,
        metavar="SECONDS",
        help="time box per fuzz test: no example is checked after it, except to shrink a failure found in the "
        "last round (--gdn-shrink-seconds)",
    )
    shrink_seconds: float = option(
        120.0,
        "--gdn-shrink-seconds",
        parse=float,
        least=0,
        metavar="SECONDS",
        help="with --gdn-test-seconds: how long a round may check new cases after its first failure (default 120)",
    )
    no_shrink: bool = option(
        False,
        "--gdn-no-shrink",
        action="store_true",
        help="report each distinct failure's first case, without shrinking (triage runs)",
    )
    masks: str = option(  # known-bug mask policy (fuzz.model.known_bugs.MASK_POLICIES)
        "release",
        "--gdn-masks",
        choices=MASK_POLICIES,
        alias=("--gdn-unmask", "none", "the same as --gdn-masks=none"),
        help="known-bug masks (fuzz/model/known_bugs.py): 'release' masks the bugs known for the installed "
        "release (default), 'all' every known bug (the upgrade gate), 'none' none (hunting)",
    )
    edges: str = option(
        "report",
        "--gdn-edges",
        choices=("report", "fail"),
        help="failures on a contract edge of a serving engine (fuzz/model/engines.py EDGES: a call the engine nearly "
        "makes, which its contract leaves to reject or skip): 'report' lists them in the summary and the report "
        "under their own heading and passes the test (default), 'fail' fails it as a bug does",
    )
    db: str | None = option(
        None,
        "--gdn-db",
        makes=True,
        metavar="DIR|redis://HOST:PORT",
        help="the Hypothesis example database: a directory, or a redis server shared across hosts",
    )
    live_log: Path | None = option(
        None,
        "--gdn-live-log",
        path=True,
        writes=True,
        metavar="FILE",
        help="append every failing example to FILE as it happens, one JSON line each (survives a killed run)",
    )
    resume: Path | None = option(
        None,
        "--gdn-resume",
        path=True,
        metavar="LIVE_LOG",
        help="the --gdn-live-log of an earlier run: before its rounds, each fuzz test shrinks the failures that run "
        "logged on its target and operation and did not report minimal (a shrink its time box cut off)",
    )
    isolate: bool = option(
        False,
        "--gdn-isolate",
        action="store_true",
        help="run each check in a worker process restarted after a crash or hang (KernelCrash, KernelHang) instead "
        "of in pytest's process; use it on the GPU profiles: an illegal memory access poisons the CUDA context",
    )
    timeout: float = option(
        DEFAULT_TIMEOUT,
        "--gdn-timeout",
        parse=float,
        least=0,
        above=True,
        metavar="SECONDS",
        help=f"with --gdn-isolate: seconds one check may take before it is a KernelHang (default {DEFAULT_TIMEOUT:g})",
    )
    kernel_cache_dir: str | None = option(
        None,
        "--gdn-kernel-cache",
        makes=True,
        metavar="DIR",
        help="keep compiled kernels under DIR, one directory per library release (default: "
        "$XDG_CACHE_HOME/gdn-fuzz/kernels); restore it in CI, keyed by the library versions and the GPU arch",
    )
    workers: str | None = option(
        None,
        "--gdn-workers",
        metavar="N|auto",
        help="pytest-xdist workers (needs pytest-xdist); 'auto' on a GPU profile: the count where distinct cases per "
        "minute peaked for this GPU kind, capped by its free memory and the cores (fuzz.run.workers); "
        "-n auto picks the same on a GPU profile",
    )
    sanitize: bool = option(
        False,
        "--gdn-sanitize",
        action="store_true",
        help="re-run each shrunk KernelCrash / GuardBreach under compute-sanitizer memcheck and attach its report",
    )
    events: Path | None = option(
        None,
        "--gdn-events",
        path=True,
        writes=True,
        metavar="FILE.jsonl",
        help="append progress events to FILE, one JSON line each (fuzz.run.events): tests selected, each test's "
        "start, its examples about once a second, its finish; an xdist worker writes FILE.gwN",
    )
    # Without a time box: the profile's bound on a test (Profile.time_box), shrinking included. Past it no case is
    # checked; unlike a time box it does not size the rounds, so a test that ends well within it draws as it did.
    bound_seconds: float | None = None
    seed: int | None = None  # --hypothesis-seed: the rounds' seeds derive from it
    kernel_cache: KernelCache | None = None  # where compiled kernels are kept (fuzz.run.kernel_cache), once configured

    @property
    def shrink(self) -> bool:
        return not self.no_shrink

    def fails_test(self, key) -> bool:
        """Whether a distinct failure (its FailureKey) fails its test: a bug does; one on a contract edge only under
        --gdn-edges fail (else the run summary lists it under its own heading)."""
        return self.edges == "fail" or not key.edge

    @classmethod
    def read(cls, get: Callable, profile: Profile) -> Options:
        """The options pytest parsed (`get`: config.getoption) for a run of `profile`, checked: a ValueError in one
        line for the first bad one."""
        given = {}
        for name, row in rows():
            if (parsed := get(row.dest, None)) is not None:  # None: not given, and no default
                value = given[name] = row.value(parsed)
                row.check(value)
        options = cls(
            **given,
            bound_seconds=None if given.get("test_seconds") else profile.time_box,
            seed=_integer("--hypothesis-seed", get("hypothesis_seed", None)),
        )
        if options.resume:
            _check_live_log("--gdn-resume", options.resume)
        if options.sanitize:
            from fuzz.run.sanitize import missing_sanitizer  # torch: read only where the plugin woke

            if why := missing_sanitizer():
                raise ValueError(f"--gdn-sanitize: {why}")
        return options

    def time_box(self, profile: str, examples: int) -> str:
        """What bounds each fuzz test of the run and where that comes from (the report's line); `examples`: the
        profile's per test."""
        count = (
            f"{self.examples} examples per fuzz test (--gdn-examples)"
            if self.examples
            else f"{examples} examples per fuzz test (the {profile} profile's)"
        )
        if self.test_seconds:
            return (
                f"{count}; time box: {self.test_seconds:g} s per fuzz test (--gdn-test-seconds), then up to "
                f"{self.shrink_seconds:g} s to shrink what its last round found"
            )
        return (
            f"{count}; time bound: {self.bound_seconds:g} s per fuzz test, shrinking included (the {profile} "
            "profile's; --gdn-test-seconds sets a time box)"
        )


def rows() -> list[tuple[str, Flag]]:
    """(Options field, its row) for each --gdn-* option, in the order --help lists them."""
    return [(f.name, f.metadata[ROW]) for f in dataclasses.fields(Options) if ROW in f.metadata]


def register(group) -> None:
    """Every --gdn-* option, with its default, in a pytest option group."""
    defaults = Options()
    for name, row in rows():
        row.add_to(group, getattr(defaults, name))


def _integer(flag: str, value) -> int | None:
    try:
        return None if value is None else int(value)
    except ValueError:
        raise ValueError(f"{flag}={value}: expected an integer") from None


def _check_live_log(flag: str, path: Path) -> None:
    """Every fuzz test reads the live log to resume: a missing or unreadable one stops the run before it starts."""
    from fuzz.run.report import live_log  # torch: only where a run resumes

    if not path.is_file():
        raise ValueError(f"{flag}={path}: no such file (the --gdn-live-log of an earlier run)")
    try:
        live_log(path)  # every line read as a test reads it
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{flag}={path}: not a --gdn-live-log ({type(e).__name__}: {e})") from None
