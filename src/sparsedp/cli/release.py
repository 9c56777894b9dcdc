"""``sparsedp release``: a private GROUP BY count of a Parquet/CSV file or a DuckDB SQL query."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, List, Optional

import typer

from ..aggregates import Count, Mean, Median, Quantile, Std, Sum, Variance
from ..auto_bound import AutoBound
from .. import pipeline
from ..accounting.intervals import DEFAULT_LEVEL
from ..request import interval_level
from ..errors import InvalidParameterError, SparsedpError
from ..mechanisms import registry
from . import app
from ._errors import RELEASE_FLAGS, OnceCommand, cli_errors, fail, interruptible, to_cli
from .keys_file import read_key_set


def progress_stages(console):
    """``stage(name)`` context managers showing each stage on ``console`` as a rich progress line: spinner,
    elapsed time and, where the engine reports it (:mod:`sparsedp.progress`: key chunks, DuckDB's query
    progress, Spark tasks), a bar with the percentage and the count. Nothing when ``console`` is not a
    terminal (logs and pipes get no spinner frames). The context yields the stage's reporter."""
    from rich.progress import (BarColumn, Progress, SpinnerColumn, TaskProgressColumn, TextColumn,
                               TimeElapsedColumn)

    if not console.is_terminal:
        return lambda name: contextlib.nullcontext()

    @contextlib.contextmanager
    def stage(name: str) -> Iterator:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
                      TextColumn("{task.fields[count]}"), TimeElapsedColumn(), console=console,
                      transient=False) as p:
            task = p.add_task(name, total=None, count="")

            def reporter(done: float, total: float | None, unit: str) -> None:
                count = "" if total is None or unit == "%" else f"{done:,.0f}/{total:,.0f} {unit}"
                p.update(task, completed=done, total=total, count=count)

            yield reporter
            t = p.tasks[0].total or 1
            p.update(task, total=t, completed=t)

    return stage


def print_result(res, console, head: int = 10) -> None:
    """Table head (rich), the public report, then the curator-only figures."""
    from rich.table import Table
    from rich.text import Text

    import polars as pl

    frame = res.table if isinstance(res.table, pl.DataFrame) else pl.from_arrow(res.table) if hasattr(
        res.table, "schema") and hasattr(res.table, "num_rows") else pl.from_pandas(res.table) if hasattr(
        res.table, "iloc") else None
    if frame is not None:
        table = Table(title=f"{frame.height} released keys, largest first", caption=(
            f"first {head} shown" if frame.height > head else None))
        for c in frame.columns:
            table.add_column(c, justify="right" if frame[c].dtype.is_numeric() else "left")
        for row in frame.head(head).iter_rows():
            table.add_row(*(Text("" if x is None else str(x)) for x in row))
        console.print(table)
    console.print(str(res.report), markup=False, highlight=False, soft_wrap=True)
    console.print(str(res.curator), markup=False, highlight=False, soft_wrap=True)


def run_release(data, *, console, err_console, head: int = 10, flags=RELEASE_FLAGS, **kwargs):
    """Call :func:`sparsedp.release` with progress display; errors in the terms of ``flags`` (exit code 2),
    an interrupt exits 130 (:func:`~sparsedp.cli._errors.cli_errors`), warnings as ``warning: …`` lines."""
    import warnings

    original = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file=None,
             line=None) -> None:  # sparsedp's warnings as one line in flag terms, when they happen
        if category.__module__.startswith("sparsedp"):
            err_console.print(f"warning: {to_cli(message, flags)}", style="yellow", markup=False,
                              highlight=False, soft_wrap=True)
        else:
            original(message, category, filename, lineno, file, line)

    with cli_errors(flags), warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        res = pipeline.release(data, progress=progress_stages(err_console), **kwargs)
    print_result(res, console, head)
    if res.curator.output:
        console.print(f"output written to {res.curator.output}", markup=False, highlight=False, soft_wrap=True)
    return res


#: the flags of mechanism options whose flag is not ``--<field name>`` (kept from before the flags were derived);
#: every other option of a registered mechanism is ``--option NAME=VALUE`` (or its historical ``--<name>`` flag)
_FLAG_ALIASES = {"k": "--top-k", "c": "--size-weight", "debias": "--shifted", "noise": "--csh-noise"}
#: ``--mechanism``'s default: options given without naming a mechanism are refused as needing ``--mechanism``
DEFAULT_MECHANISM = "auto"


def option_flag(name: str) -> str:
    """The CLI flag of the mechanism option ``name`` (a field of a registered mechanism class)."""
    return _FLAG_ALIASES.get(name, "--" + name.replace("_", "-"))


def key_columns(by: List[str]) -> list[str]:
    """``--by`` → the key columns: each value is comma-separated, and the flag may be repeated (``--by a --by b``
    is ``--by a,b``). Without the list, a repeated flag would silently keep only its last value."""
    return [c.strip() for b in by for c in b.split(",") if c.strip()]


def parse_options(specs: Optional[List[str]], mechanism: str, top_k: Optional[int] = None) -> dict:
    """``--option NAME=VALUE`` (repeatable) → ``{name: value}``, each value parsed by the type of the mechanism
    class's field (``int``, ``float``, ``bool``, ``str``, a tuple of strings as ``a,b,c``; ``none`` for an
    optional one). The options are the registered class's typed fields, so a new mechanism's options reach the
    CLI without a new flag."""
    if not specs:
        return {}
    cls = registry.get(mechanism)
    if top_k is not None and "k" not in registry.option_names(cls):  # the class --top-k configures
        cls = type(cls.with_top_k(None, top_k, False))
    fields = registry.option_fields(cls)
    out = {}
    for spec in specs:
        name, sep, text = spec.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name:
            raise InvalidParameterError(f"--option takes NAME=VALUE (e.g. --option pre_threshold=5), got {spec!r}")
        if name not in fields:
            own = ", ".join(fields) or "none"
            raise InvalidParameterError(f"--option {name} is not an option of --mechanism {cls.name} (its "
                                        f"options: {own})")
        out[name] = _parse_value(name, text.strip(), fields[name])
    return out


def _parse_value(name: str, text: str, annotation: Any) -> Any:
    kind = str(annotation)
    if text.lower() == "none" and ("None" in kind or "Any" in kind):
        return None
    try:
        if kind.startswith("bool"):
            if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(text)
            return text.lower() in ("true", "1", "yes")
        if kind.startswith("int"):
            return int(text)
        if kind.startswith("float") or kind.startswith("Fraction"):
            return float(text) if kind.startswith("float") else text
        if kind.startswith("tuple"):
            return tuple(x for x in text.split(",") if x)
    except ValueError:
        raise InvalidParameterError(f"--option {name}={text!r}: expected {kind}") from None
    return text


def build_mechanism(name: str, options: dict):
    """The mechanism object for ``--mechanism NAME`` and the mechanism options the user set (``options``: option
    name -> value, from ``--option`` or the historical flags), checked against the registered class's typed
    fields. ``--top-k`` with a mechanism that has no ``k`` is the top-k shorthand
    (:meth:`~sparsedp.mechanisms.base.Mechanism.with_top_k`). Raises
    :class:`~sparsedp.errors.InvalidParameterError` in CLI terms."""
    cls = registry.get(name)
    options = dict(options)
    if "k" in options and "k" not in registry.option_names(cls):  # --top-k K: the class that k configures
        shorthand = cls.with_top_k(None, options.pop("k"), False)
        cls, options = type(shorthand), {**registry.create(shorthand).options(), **options}
        name = cls.name
    needed = registry.required_options(cls) + cls.needs_options
    if not options and not needed:
        return name
    known = registry.option_names(cls)
    bad = [o for o in options if o not in known]
    if bad and name == DEFAULT_MECHANISM:
        raise InvalidParameterError(f"{', '.join(map(option_flag, bad))} needs --mechanism ({name} has "
                                    f"{'no options' if not known else 'the options ' + ', '.join(map(option_flag, known))})")
    if bad:
        own = ", ".join(map(option_flag, known)) or "none"
        raise InvalidParameterError(f"{', '.join(map(option_flag, bad))} is not an option of --mechanism {name} "
                                    f"(its options: {own})")
    missing = [f for f in needed if f not in options]
    if missing:
        raise InvalidParameterError(f"--mechanism {name} needs {', '.join(map(option_flag, missing))}")
    return registry.create(cls, **options)


def mechanism_from_flags(mechanism: str, flags: dict, option: Optional[List[str]], top_k: Optional[int]):
    """The mechanism object of ``--mechanism``, its shorthand flags (``flags``: option name -> value or None) and
    its ``--option NAME=VALUE`` settings; an option given both ways is refused."""
    options = {k: x for k, x in flags.items() if x is not None}
    extra = parse_options(option, mechanism, top_k)
    twice = sorted(set(extra) & set(options))
    if twice:
        raise InvalidParameterError(f"{', '.join(map(option_flag, twice))} is given twice (flag and --option)")
    return build_mechanism(mechanism, {**options, **extra})


def parse_aggregate(flag: str, spec: str):
    """``--sum``/``--mean``/``--variance``/``--std`` ``COLUMN:LOWER:UPPER[:NAME]`` → :class:`~sparsedp.aggregates.Sum` /
    :class:`~sparsedp.aggregates.Mean` / :class:`~sparsedp.aggregates.Variance` / :class:`~sparsedp.aggregates.Std`; raises :class:`~sparsedp.errors.InvalidParameterError` in flag terms."""
    parts = spec.split(":")
    if len(parts) not in (3, 4) or not parts[0]:
        raise InvalidParameterError(f"{flag} takes COLUMN:LOWER:UPPER[:NAME] (e.g. {flag} dwell_s:0:600), "
                                    f"got {spec!r}")
    try:
        lo, hi = float(parts[1]), float(parts[2])
    except ValueError:
        raise InvalidParameterError(f"{flag} {spec!r}: LOWER and UPPER must be numbers") from None
    cls = {"--sum": Sum, "--variance": Variance, "--std": Std}.get(flag, Mean)
    return cls(parts[0], lo, hi, name=parts[3] if len(parts) == 4 else None)


def parse_quantile(flag: str, spec: str):
    """``--quantile COLUMN:Q:LOWER:UPPER[:NAME]`` → :class:`~sparsedp.aggregates.Quantile`, ``--median
    COLUMN:LOWER:UPPER[:NAME]`` → :class:`~sparsedp.aggregates.Median`; errors in flag terms."""
    parts = spec.split(":")
    n = 4 if flag == "--quantile" else 3
    form = "COLUMN:Q:LOWER:UPPER[:NAME] (e.g. --quantile dwell_s:0.9:0:600)" if n == 4 else \
        "COLUMN:LOWER:UPPER[:NAME] (e.g. --median dwell_s:0:600)"
    if len(parts) not in (n, n + 1) or not parts[0]:
        raise InvalidParameterError(f"{flag} takes {form}, got {spec!r}", param="quantile")
    try:
        nums = [float(x) for x in parts[1:n]]
    except ValueError:
        raise InvalidParameterError(f"{flag} {spec!r}: {'Q, ' if n == 4 else ''}LOWER and UPPER must be numbers",
                                    param="quantile") from None
    name = parts[n] if len(parts) == n + 1 else None
    if n == 4:
        return Quantile(parts[0], nums[0], nums[1], nums[2], name=name)
    return Median(parts[0], nums[0], nums[1], name=name)


def parse_column_shape(spec: Optional[str]):
    """``--column-shape`` ``a,b;c,d`` (rows separated by ``;``, entries by ``,``) → a list of rows of floats;
    the matrix itself is checked by the library (symmetric, positive definite, one row per SUM/MEAN column)."""
    if spec is None:
        return None
    try:
        rows = [[float(x) for x in row.split(",")] for row in spec.split(";")]
    except ValueError:
        raise InvalidParameterError(f"--column-shape takes rows separated by ';' and numbers separated by ',' "
                                    f"(e.g. --column-shape '90000,750;750,25'), got {spec!r}") from None
    return rows


def parse_max_groups(value: Optional[str], share: Optional[float], quantile: Optional[float],
                     objective: Optional[str] = None):
    """``--max-groups``: a positive integer, or ``auto`` (with ``--auto-share`` / ``--auto-quantile`` /
    ``--auto-objective``)."""
    if value is not None and value.strip().lower() == "auto":
        opts: dict[str, Any] = {k: x for k, x in (("share", share), ("quantile", quantile),
                                                  ("objective", objective)) if x is not None}
        return AutoBound(**opts)  # its errors name auto_share, auto_quantile, auto_objective: flags on the CLI
    if share is not None or quantile is not None or objective is not None:
        raise InvalidParameterError("--auto-share, --auto-quantile and --auto-objective go with --max-groups auto")
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        raise InvalidParameterError(f"--max-groups must be a positive integer or 'auto', got {value!r}") from None
    if n < 1:
        raise InvalidParameterError(f"--max-groups must be a positive integer or 'auto', got {value!r}")
    return n


def mechanism_help() -> str:
    """``--mechanism``'s help, from the registry (every registered name, grouped by what it needs)."""
    names = [n for n in registry.names() if n != "auto"]
    pure = {n for n, _ in registry.pure_names()}
    keyed = [n for n in names if registry.get(n).public_keys]
    rows = [n for n in names if registry.get(n).row_units]
    plain = [n for n in names if n not in pure and n not in keyed and n not in rows]
    return (f"auto (default: the lowest threshold among the count mechanisms), {', '.join(plain)}; pure DP (delta "
            f"0): {', '.join(n for n in names if n in pure and n not in keyed)}; with --keys: {', '.join(keyed)}; "
            f"sketch: {', '.join(rows)}.")


class _ReleaseCommand(OnceCommand):
    """``sparsedp release``: ``--mechanism``'s help is read from the registry when help is shown (importing
    every mechanism at start-up would slow every command)."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        for param in self.params:
            if param.name == "mechanism":
                param.help = mechanism_help()  # type: ignore[attr-defined]
        return super().format_help(ctx, formatter)


_MECH = "Mechanism options"
_AUTO = "Automatic bound (--max-groups auto)"
_AGG = "Aggregates and intervals"
_OUT = "Output and budget"


def _aggregates(flags: dict[str, Optional[List[str]]]) -> list[Any]:
    """The aggregates of ``--sum/--mean/--quantile/--median/--variance/--std``, in that order."""
    return [(parse_quantile if flag in ("--quantile", "--median") else parse_aggregate)(flag, x)
            for flag, values in flags.items() for x in values or ()]


def _interval(interval: Optional[float], no_interval: bool) -> Optional[float]:
    """The interval level of ``--interval LEVEL`` / ``--no-interval`` (None: no interval columns); without either
    flag the default level (0.95)."""
    if interval is not None and no_interval:
        raise InvalidParameterError("--interval and --no-interval exclude each other: pass --interval LEVEL for "
                                    "another level than 0.95, or --no-interval for no interval columns")
    level: Optional[float] = interval_level(None if no_interval else DEFAULT_LEVEL if interval is None else interval)
    return level


@app.command(cls=_ReleaseCommand, epilog=(
    "Example: sparsedp release searches.parquet --unit user_id --by query --epsilon 1 --delta 1e-7 "
    "--max-groups 10 --out counts.csv   (see `sparsedp plan` to choose the parameters)"))
@interruptible
def release(
    input: str = typer.Argument(..., help="Parquet/CSV file, glob or directory of parts, or SQL text run by DuckDB "
                                          "(\"SELECT user_id, url FROM 'shares.parquet'\")."),
    unit: str = typer.Option(..., "--unit", "--privacy-unit", help="Privacy unit column (whom it protects)."),
    by: List[str] = typer.Option(..., "--by", metavar="<str>", help="Key column(s): a,b or repeated."),
    epsilon: float = typer.Option(..., "--epsilon", help="Epsilon (> 0)."),
    delta: Optional[float] = typer.Option(None, "--delta", help="Delta (0 < delta < 1; 0 for pure DP)."),
    max_groups: Optional[str] = typer.Option(None, "--max-groups", "--max-groups-per-unit",
                                             help="Keys kept per unit (integer or 'auto')."),
    top_k: Optional[int] = typer.Option(None, "--top-k", help="Release the top k keys (top-k CSH)."),
    mechanism: str = typer.Option(DEFAULT_MECHANISM, "--mechanism", help="auto or a registered mechanism."),
    auto_share: Optional[float] = typer.Option(None, "--auto-share", rich_help_panel=_AUTO,
                                               help="Epsilon share for the bound (0.05; 0.1 for 'keys')."),
    auto_quantile: Optional[float] = typer.Option(None, "--auto-quantile", rich_help_panel=_AUTO,
                                                  help="Fraction of units keeping all their keys (0.5)."),
    auto_objective: Optional[str] = typer.Option(None, "--auto-objective", rich_help_panel=_AUTO,
                                                 help="'quantile' (default) or 'keys' (most released keys)."),
    shifted: bool = typer.Option(False, "--shifted", rich_help_panel=_MECH,
                                 help="Top-k: release count minus the (k+1)-th count."),
    csh_noise: Optional[str] = typer.Option(None, "--csh-noise", rich_help_panel=_MECH,
                                            help="Top-k noise: 'rounded' (default) or 'alg4'."),
    sketch_size: Optional[int] = typer.Option(None, "--sketch-size", rich_help_panel=_MECH,
                                              help="misra-gries: number of counters."),
    unit_sketch: Optional[str] = typer.Option(None, "--unit-sketch", rich_help_panel=_MECH,
                                              help="misra-gries: 'pamg' (default) or 'group-privacy'."),
    max_units: Optional[int] = typer.Option(None, "--max-units", rich_help_panel=_MECH,
                                            help="Pure DP: public bound on the number of units."),
    domain_size: Optional[int] = typer.Option(None, "--domain-size", rich_help_panel=_MECH,
                                              help="basic: integer keys in [0, domain-size)."),
    max_key_bytes: Optional[int] = typer.Option(None, "--max-key-bytes", rich_help_panel=_MECH,
                                                help="Pure DP: keys of at most this many UTF-8 bytes (16)."),
    query_keys: Optional[str] = typer.Option(None, "--query-keys", rich_help_panel=_MECH,
                                             help="compact: comma-separated keys to print."),
    pre_threshold: Optional[int] = typer.Option(None, "--pre-threshold", rich_help_panel=_MECH,
                                                help="Never release keys with fewer units."),
    keys_file: Optional[List[str]] = typer.Option(None, "--keys", rich_help_panel=_MECH, metavar="<str>",
                                                  help="Public keys FILE, or COL=FILE,…: only those public."),
    size_weight: Optional[int] = typer.Option(None, "--size-weight", rich_help_panel=_MECH,
                                              help="correlated-gaussian: weight C of the size coordinate."),
    known_n: Optional[float] = typer.Option(None, "--known-n", rich_help_panel=_MECH,
                                            help="correlated-gaussian: a released estimate of the unit count."),
    group: Optional[str] = typer.Option(None, "--group", rich_help_panel=_MECH,
                                        help="With --keys: the --by column grouping the keys."),
    split: Optional[float] = typer.Option(None, "--split", rich_help_panel=_MECH,
                                          help="two-stage: share of epsilon selecting keys (0.5)."),
    count_bound: Optional[int] = typer.Option(None, "--count-bound", rich_help_panel=_MECH,
                                              help="two-stage: keys per unit counted in stage 2."),
    select: Optional[str] = typer.Option(None, "--select", rich_help_panel=_MECH,
                                         help="two-stage: selecting mechanism (auto, gshm, mad2r, …)."),
    objective: Optional[str] = typer.Option(None, "--objective", rich_help_panel=_MECH,
                                            help="auto: 'counts' (lowest threshold, default) or 'keys' (most "
                                                 "released keys, any selection mechanism)."),
    option: Optional[List[str]] = typer.Option(None, "--option", rich_help_panel=_MECH,
                                               help="Any mechanism option as NAME=VALUE (repeatable)."),
    count_column: str = typer.Option("count", "--count-column", rich_help_panel=_AGG,
                                     help="Name of the noisy count column."),
    sums: Optional[List[str]] = typer.Option(None, "--sum", rich_help_panel=_AGG,
                                             help="Private SUM per key: COLUMN:LOWER:UPPER[:NAME]; repeatable."),
    means: Optional[List[str]] = typer.Option(None, "--mean", rich_help_panel=_AGG,
                                              help="Private MEAN per key: COLUMN:LOWER:UPPER[:NAME]; repeatable."),
    quantiles: Optional[List[str]] = typer.Option(None, "--quantile", rich_help_panel=_AGG,
                                                  help="Per released key: COL:Q:LO:HI[:NAME]; --median COL:LO:HI."),
    medians: Optional[List[str]] = typer.Option(None, "--median", rich_help_panel=_AGG, hidden=True,
                                                help="Private median per released key: COLUMN:LOWER:UPPER[:NAME]."),
    variances: Optional[List[str]] = typer.Option(None, "--variance", rich_help_panel=_AGG,
                                                  help="Private VARIANCE per key: COL:LO:HI[:NAME]; --std COL:LO:HI."),
    stds: Optional[List[str]] = typer.Option(None, "--std", rich_help_panel=_AGG, hidden=True,
                                             help="Private STD per key: COLUMN:LOWER:UPPER[:NAME]."),
    interval: Optional[float] = typer.Option(None, "--interval", rich_help_panel=_AGG,
                                             help="Per-row intervals' level (0.95): <col>_lo/_hi."),
    no_interval: bool = typer.Option(False, "--no-interval", rich_help_panel=_AGG,
                                     help="No interval columns."),
    column_shape: Optional[str] = typer.Option(None, "--column-shape", rich_help_panel=_AGG,
                                               help="Noise covariance shape, e.g. '90000,750;750,25'."),
    other: bool = typer.Option(False, "--other", rich_help_panel=_AGG,
                               help="One more row: the private total of the keys not released."),
    out: Optional[str] = typer.Option(None, "--out", rich_help_panel=_OUT,
                                      help="Write the table (.parquet/.csv; atomic, with its guarantee)."),
    overwrite: bool = typer.Option(False, "--overwrite", rich_help_panel=_OUT,
                                   help="Replace an existing --out file."),
    ledger: Optional[str] = typer.Option(None, "--ledger", rich_help_panel=_OUT,
                                         help="Charge a budget in this ledger file."),
    dataset: Optional[str] = typer.Option(None, "--dataset", rich_help_panel=_OUT,
                                          help="Dataset whose budget --ledger charges."),
    engine: Optional[str] = typer.Option(None, "--engine", rich_help_panel=_OUT,
                                         help="polars, duckdb, pandas, arrow or spark (default: chosen)."),
    head: int = typer.Option(10, "--head", min=0, metavar="<int>", rich_help_panel=_OUT,
                             help="Rows of the table to print."),
) -> None:
    """Release private distinct-unit counts per key (and SUM/MEAN/VARIANCE/STD), bounded, with a report."""
    from rich.console import Console

    err = Console(stderr=True)
    flags = {"pre_threshold": pre_threshold, "sketch_size": sketch_size, "max_units": max_units,
             "domain_size": domain_size, "max_key_bytes": max_key_bytes, "k": top_k, "c": size_weight,
             "known_n": known_n, "group": group, "count_bound": count_bound, "select": select, "split": split,
             "query_keys": None if query_keys is None else tuple(q for q in query_keys.split(",") if q),
             "debias": False if shifted else None, "unit_sketch": unit_sketch, "noise": csh_noise,
             "objective": objective}
    try:
        if csh_noise is not None and csh_noise not in ("rounded", "alg4"):
            raise InvalidParameterError(f"--csh-noise must be 'rounded' or 'alg4', got {csh_noise!r}")
        by_cols = key_columns(by)
        if group is not None and not keys_file:
            raise InvalidParameterError("--group groups a public key list: pass --keys FILE too")
        if group is not None and group not in by_cols:
            raise InvalidParameterError(f"--group {group!r} must be one of the --by columns ({', '.join(by_cols)})")
        mech = mechanism_from_flags(mechanism, flags, option, top_k)
        max_groups_per_unit = parse_max_groups(max_groups, auto_share, auto_quantile, auto_objective)
        aggregates = [Count(name=count_column)] + _aggregates(
            {"--sum": sums, "--mean": means, "--quantile": quantiles, "--median": medians, "--variance": variances,
             "--std": stds})
        shape = parse_column_shape(column_shape)
        level = _interval(interval, no_interval)
        keys = read_key_set(keys_file, by_cols) if keys_file else None
    except SparsedpError as e:
        fail(e, RELEASE_FLAGS)
    run_release(input, console=Console(), err_console=err, head=head, privacy_unit=unit,
                by=by_cols, epsilon=epsilon, delta=delta,
                max_groups_per_unit=max_groups_per_unit, mechanism=mech, engine=engine, out=out, overwrite=overwrite, ledger=ledger,
                dataset=dataset, aggregates=aggregates, keys=keys,
                **({"column_shape": shape} if shape is not None else {}),
                **({"other": True} if other else {}),
                interval=level)
