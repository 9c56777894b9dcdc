"""``sparsedp release``: a private GROUP BY count of a Parquet/CSV file or a DuckDB SQL query."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, List, Optional

import typer

from . import app
from ._errors import (RELEASE_FLAGS, cli_errors, fail, interruptible,  # noqa: F401 (sigterm_as_interrupt:
                      sigterm_as_interrupt, to_cli)  # re-exported for other commands)


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

    from ..pipeline import release

    original = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file=None,
             line=None) -> None:  # sparsedp's warnings as one line in flag terms, when they happen
        if category.__module__.startswith("sparsedp"):
            err_console.print(f"warning: {to_cli(str(message), flags)}", style="yellow", markup=False,
                              highlight=False, soft_wrap=True)
        else:
            original(message, category, filename, lineno, file, line)

    with cli_errors(flags), warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        res = release(data, progress=progress_stages(err_console), **kwargs)
    print_result(res, console, head)
    if res.curator.output:
        console.print(f"output written to {res.curator.output}", markup=False, highlight=False, soft_wrap=True)
    return res


#: the flags of mechanism options whose flag is not ``--<field name>`` (kept from before the flags were derived);
#: every other option of a registered mechanism is ``--option NAME=VALUE`` (or its historical ``--<name>`` flag)
_FLAG_ALIASES = {"k": "--top-k", "c": "--size-weight", "debias": "--shifted"}
#: ``--mechanism``'s default: options given without naming a mechanism are refused as needing ``--mechanism``
DEFAULT_MECHANISM = "auto"


def option_flag(name: str) -> str:
    """The CLI flag of the mechanism option ``name`` (a field of a registered mechanism class)."""
    return _FLAG_ALIASES.get(name, "--" + name.replace("_", "-"))


def parse_options(specs: Optional[List[str]], mechanism: str, top_k: Optional[int] = None) -> dict:
    """``--option NAME=VALUE`` (repeatable) → ``{name: value}``, each value parsed by the type of the mechanism
    class's field (``int``, ``float``, ``bool``, ``str``, a tuple of strings as ``a,b,c``; ``none`` for an
    optional one). The options are the registered class's typed fields, so a new mechanism's options reach the
    CLI without a new flag."""
    from ..errors import InvalidParameterError
    from ..mechanisms import registry

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
    from ..errors import InvalidParameterError

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
    from ..errors import InvalidParameterError
    from ..mechanisms import registry

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
    from ..errors import InvalidParameterError

    options = {k: x for k, x in flags.items() if x is not None}
    extra = parse_options(option, mechanism, top_k)
    twice = sorted(set(extra) & set(options))
    if twice:
        raise InvalidParameterError(f"{', '.join(map(option_flag, twice))} is given twice (flag and --option)")
    return build_mechanism(mechanism, {**options, **extra})


def parse_aggregate(flag: str, spec: str):
    """``--sum``/``--mean`` ``COLUMN:LOWER:UPPER[:NAME]`` → :class:`~sparsedp.aggregates.Sum` /
    :class:`~sparsedp.aggregates.Mean`; raises :class:`~sparsedp.errors.InvalidParameterError` in flag terms."""
    from ..aggregates import Mean, Sum
    from ..errors import InvalidParameterError

    parts = spec.split(":")
    if len(parts) not in (3, 4) or not parts[0]:
        raise InvalidParameterError(f"{flag} takes COLUMN:LOWER:UPPER[:NAME] (e.g. {flag} dwell_s:0:600), "
                                    f"got {spec!r}")
    try:
        lo, hi = float(parts[1]), float(parts[2])
    except ValueError:
        raise InvalidParameterError(f"{flag} {spec!r}: LOWER and UPPER must be numbers") from None
    cls = Sum if flag == "--sum" else Mean
    return cls(parts[0], lo, hi, name=parts[3] if len(parts) == 4 else None)


def parse_column_shape(spec: Optional[str]):
    """``--column-shape`` ``a,b;c,d`` (rows separated by ``;``, entries by ``,``) → a list of rows of floats;
    the matrix itself is checked by the library (symmetric, positive definite, one row per SUM/MEAN column)."""
    from ..errors import InvalidParameterError

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
    from ..auto_bound import AutoBound
    from ..errors import InvalidParameterError

    if value is not None and value.strip().lower() == "auto":
        from ..errors import SparsedpError

        opts: dict[str, Any] = {k: x for k, x in (("share", share), ("quantile", quantile),
                                                  ("objective", objective)) if x is not None}
        try:
            return AutoBound(**opts)
        except SparsedpError as e:  # in the CLI's terms
            raise type(e)(str(e).replace("AutoBound share", "--auto-share")
                          .replace("AutoBound quantile", "--auto-quantile")
                          .replace("AutoBound objective", "--auto-objective")) from None
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


@app.command()
@interruptible
def release(
    input: str = typer.Argument(..., help="Parquet/CSV file (or glob), or SQL text run by DuckDB "
                                          "(e.g. \"SELECT user_id, url FROM 'shares.parquet'\")."),
    unit: str = typer.Option(..., "--unit", "--privacy-unit", help="Privacy unit column (whom the guarantee "
                                                                   "protects)."),
    by: str = typer.Option(..., "--by", help="Key column(s), comma-separated."),
    epsilon: float = typer.Option(..., "--epsilon", help="Privacy parameter epsilon (> 0)."),
    delta: Optional[float] = typer.Option(None, "--delta", help="Privacy parameter delta (0 < delta < 1; "
                                                                 "0 for the pure mechanisms)."),
    max_groups: Optional[str] = typer.Option(None, "--max-groups", "--max-groups-per-unit",
                                             help="Keep at most this many keys per unit (GSHM, Laplace); 'auto': "
                                                  "choose it privately from the data with --auto-share of epsilon."),
    auto_share: Optional[float] = typer.Option(None, "--auto-share", help="With --max-groups auto: the share "
                                               "of epsilon spent choosing the bound (default 0.1)."),
    auto_quantile: Optional[float] = typer.Option(None, "--auto-quantile", help="With --max-groups auto: the "
                                                  "target fraction of units keeping all their keys (default 0.9)."),
    auto_objective: Optional[str] = typer.Option(None, "--auto-objective", help="With --max-groups auto: "
                                                 "'quantile' (default: the --auto-quantile rule) or 'keys' (the "
                                                 "bound with the most expected released keys)."),
    top_k: Optional[int] = typer.Option(None, "--top-k", help="Release the top k keys (top-k CSH; de-biased "
                                                              "counts)."),
    shifted: bool = typer.Option(False, "--shifted", help="Top-k: release count minus the (k+1)-th count "
                                                          "(column count_minus_cutoff) instead of counts."),
    out: Optional[str] = typer.Option(None, "--out", help="Write the table to this .parquet/.csv file "
                                                           "(atomically, with the guarantee as metadata)."),
    engine: Optional[str] = typer.Option(None, "--engine", help="polars (default), duckdb (default for SQL), "
                                                                 "pandas, arrow or spark (a local Spark session "
                                                                 "unless a cluster is configured)."),
    mechanism: str = typer.Option(DEFAULT_MECHANISM, "--mechanism", help="auto, gshm, laplace, topk-csh, two-stage; pure DP "
                                  "(one key per unit): pure-blanket (auto at --delta 0), pure-sparse, compact, basic, "
                                  "stability, keep-heavy, kh-prime, "
                                  "kh-double-prime, sparse-histogram; misra-gries."),
    count_column: str = typer.Option("count", "--count-column", help="Name of the noisy count column."),
    sums: Optional[List[str]] = typer.Option(None, "--sum", help="Also release a private SUM per key: "
                                             "COLUMN:LOWER:UPPER[:NAME] (each unit's per-key total clipped to "
                                             "[LOWER, UPPER]); repeatable. GSHM/auto or --top-k."),
    means: Optional[List[str]] = typer.Option(None, "--mean", help="Also release a private MEAN per key: "
                                              "COLUMN:LOWER:UPPER[:NAME]; repeatable."),
    column_shape: Optional[str] = typer.Option(None, "--column-shape", help="With --sum/--mean (GSHM): the "
                                               "shape of the columns' noise covariance in value units², rows "
                                               "separated by ';' (e.g. '90000,750;750,25'), one row per noisy "
                                               "column in --sum, --mean order (a --sum and --mean of the same "
                                               "column and bounds share one); the noise has covariance about "
                                               "sigma² x this. Default: independent columns."),
    sketch_size: Optional[int] = typer.Option(None, "--sketch-size", help="misra-gries: number of counters k."),
    max_units: Optional[int] = typer.Option(None, "--max-units", help="Pure mechanisms: public bound on the "
                                            "number of units (add/remove-one neighbours; else n is public)."),
    domain_size: Optional[int] = typer.Option(None, "--domain-size", help="basic: integer keys in "
                                              "[0, domain-size)."),
    max_key_bytes: Optional[int] = typer.Option(None, "--max-key-bytes", help="Pure mechanisms: keys are strings "
                                                "of at most this many UTF-8 bytes (public domain bound; default "
                                                "16)."),
    query_keys: Optional[str] = typer.Option(None, "--query-keys", help="compact: comma-separated public keys "
                                             "whose noisy counts to print."),
    pre_threshold: Optional[int] = typer.Option(None, "--pre-threshold", help="GSHM/Laplace: never release keys "
                                                "with fewer units."),
    keys_file: Optional[str] = typer.Option(None, "--keys", help="Public key list: every listed key gets a noisy "
                                            "count, no threshold (a text file with one key per line, or a .csv/"
                                            ".parquet with the --by columns). Must not be derived from the data."),
    size_weight: Optional[int] = typer.Option(None, "--size-weight", help="correlated-gaussian: the weight C of "
                                              "the size coordinate (seed 002 §3.1)."),
    known_n: Optional[float] = typer.Option(None, "--known-n", help="correlated-gaussian: a previously released "
                                            "estimate of the number of units (seed 002 Lemma 3.6)."),
    group: Optional[str] = typer.Option(None, "--group", help="With --keys: the --by column whose values group the "
                                        "keys; each unit counts in one group only (seed 002 Algorithm 2, "
                                        "grouped-correlated-gaussian; auto compares it with the others)."),
    split: Optional[float] = typer.Option(None, "--split", help="two-stage: share of epsilon spent "
                                          "selecting the keys (default 0.5; delta is split in half)."),
    count_bound: Optional[int] = typer.Option(None, "--count-bound", help="two-stage: keys per unit counted "
                                              "in stage 2 (default: no bound)."),
    select: Optional[str] = typer.Option(None, "--select", help="two-stage: the selecting mechanism (gshm, "
                                         "laplace; default gshm)."),
    option: Optional[List[str]] = typer.Option(None, "--option", help="A mechanism option as NAME=VALUE, "
                                               "repeatable (the mechanism class's typed fields, e.g. --option "
                                               "pre_threshold=5, --option grid=1024); the flags above are "
                                               "shorthands for some of them."),
    head: int = typer.Option(10, "--head", help="Rows of the table to print."),
    ledger: Optional[str] = typer.Option(None, "--ledger", help="Charge the release against a budget in "
                                                                 "this ledger file (see `sparsedp ledger`)."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Dataset name whose budget --ledger "
                                                                   "charges."),
) -> None:
    """Release noisy distinct-unit counts per key (and, with --sum/--mean, private sums and means), with
    contribution bounding and a printed report."""
    from rich.console import Console

    from ..aggregates import Count
    from ..errors import InvalidParameterError, SparsedpError

    err = Console(stderr=True)
    flags = {"pre_threshold": pre_threshold, "sketch_size": sketch_size, "max_units": max_units,
             "domain_size": domain_size, "max_key_bytes": max_key_bytes, "k": top_k, "c": size_weight,
             "known_n": known_n, "group": group, "count_bound": count_bound, "select": select, "split": split,
             "query_keys": None if query_keys is None else tuple(q for q in query_keys.split(",") if q),
             "debias": False if shifted else None}
    try:
        by_cols = [c.strip() for c in by.split(",") if c.strip()]
        if group is not None and keys_file is None:
            raise InvalidParameterError("--group groups a public key list: pass --keys FILE too")
        if group is not None and group not in by_cols:
            raise InvalidParameterError(f"--group {group!r} must be one of the --by columns ({', '.join(by_cols)})")
        mech = mechanism_from_flags(mechanism, flags, option, top_k)
        max_groups_per_unit = parse_max_groups(max_groups, auto_share, auto_quantile, auto_objective)
        aggregates = [Count(name=count_column)]
        aggregates += [parse_aggregate("--sum", x) for x in sums or ()]
        aggregates += [parse_aggregate("--mean", x) for x in means or ()]
        shape = parse_column_shape(column_shape)
        keys = None
        if keys_file is not None:
            from .keys_file import read_keys

            keys = read_keys(keys_file, [c.strip() for c in by.split(",") if c.strip()])
    except SparsedpError as e:
        fail(e, RELEASE_FLAGS)
    run_release(input, console=Console(), err_console=err, head=head, privacy_unit=unit,
                by=[c.strip() for c in by.split(",") if c.strip()], epsilon=epsilon, delta=delta,
                max_groups_per_unit=max_groups_per_unit, mechanism=mech, engine=engine, out=out, ledger=ledger,
                dataset=dataset, aggregates=aggregates, keys=keys,
                **({"column_shape": shape} if shape is not None else {}))
