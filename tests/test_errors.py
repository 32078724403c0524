"""One exception tree: drawn in errors.py, listed in the docs' exit codes, mapped by family at
the edges."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

import httpx
import pytest
from rocksdict import Options, Rdict

import claimgraph
from claimgraph import errors
from claimgraph.core.model import Reason
from claimgraph.core.rules import compile_cel, evaluate
from claimgraph.errors import ClaimgraphError, StorageError
from claimgraph.http.problems import _ERROR_REASONS, HTTP_REASONS, error_problem
from claimgraph.logs.rocks import estimated_keys, rocksdb_errors
from claimgraph.sdk.http import HttpGraph

cli_main = importlib.import_module("claimgraph.cli.main")  # the module (the package exports main)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "claimgraph"

# -- the tree, as drawn ----------------------------------------------------------------------

_LINE = re.compile(
    r"^(?P<indent>[│├└─ ]*)(?P<name>[A-Z]\w+)\s+(?P<exit>\d+)\s+(?P<http>\d{3}(?:/\d{3})*)\s+\S"
)


def _drawn() -> dict[str, tuple[str | None, int, set[int]]]:
    """name → (parent drawn above it, exit code, HTTP statuses), from errors.py's docstring."""
    out: dict[str, tuple[str | None, int, set[int]]] = {}
    stack: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        depth = len(m["indent"]) // 4
        del stack[depth:]
        out[m["name"]] = (
            stack[-1] if stack else None,
            int(m["exit"]),
            {int(s) for s in m["http"].split("/")},
        )
        stack.append(m["name"])
    return out


DRAWN = _drawn()
TREE = {
    name: obj
    for name, obj in vars(errors).items()
    if isinstance(obj, type) and issubclass(obj, ClaimgraphError)
}
FAMILIES = {name for name, cls in TREE.items() if cls.__bases__ == (ClaimgraphError,)}


def _family(cls: type[ClaimgraphError]) -> type[ClaimgraphError]:
    return next(c for c in reversed(cls.__mro__) if c in TREE.values() and c is not ClaimgraphError)


def test_the_drawn_tree_is_the_class_tree() -> None:
    """errors.py's docstring draws every class of the tree, under its real parent, with its
    real exit code."""
    assert set(DRAWN) == set(TREE) == set(errors.__all__)
    for name, (parent, code, _) in DRAWN.items():
        cls = TREE[name]
        assert cls.exit_code == code, name
        if parent is None:
            assert cls is ClaimgraphError
        else:
            assert cls.__bases__ == (TREE[parent],), name


def test_one_exit_code_per_family() -> None:
    """Each family has an exit code of its own; its members share it."""
    codes = [TREE[f].exit_code for f in FAMILIES] + [ClaimgraphError.exit_code]
    assert len(codes) == len(set(codes)), codes
    assert 70 not in codes and 130 not in codes  # internal error, interrupted
    for cls in TREE.values():
        if cls is not ClaimgraphError:
            assert cls.exit_code == _family(cls).exit_code, cls


def test_every_error_is_public() -> None:
    """Every class of the tree is exported by the package, so callers can catch it."""
    for name in errors.__all__:
        assert getattr(claimgraph, name) is TREE[name]


# -- the docs' table (reference/exit-codes.md, generated from errors.py) ----------------------


def _readme_rows() -> list[tuple[int, str, str, str]]:
    from tests.docs_text import reference_page

    text = reference_page("reference/exit-codes.md")
    start = text.index("| Exit | Error | Meaning | HTTP |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        code, error, meaning, http = (c.strip() for c in line.strip("|").split("|"))
        rows.append((int(code), error, meaning, http))
    return rows


def test_readme_exit_code_table_is_the_tree() -> None:
    """The docs' exit-code table lists every family with its exit code and HTTP statuses,
    and every error it names is in that family."""
    listed: set[str] = set()
    for code, error, meaning, http in _readme_rows():
        if error == "—":
            assert code not in {cls.exit_code for cls in TREE.values()} or code == 1
            continue
        name = error.strip("`")
        cls = TREE[name]
        listed.add(name)
        assert cls.exit_code == code, name
        members = {m for m in re.findall(r"`(\w+)`", meaning) if m in TREE}
        for m in members:
            assert issubclass(TREE[m], cls) and TREE[m].exit_code == code, (name, m)
        documented = {s for n in {name, *members} for s in DRAWN[n][2]}
        assert {int(s) for s in re.findall(r"\d{3}", http)} == documented, name
    assert listed == FAMILIES | {"ClaimgraphError"}


# -- the edges: HTTP status and CLI exit code by family ---------------------------------------


def _sample(cls: type[ClaimgraphError]) -> list[ClaimgraphError]:
    """Instances of ``cls`` as the code raises them (AuthError: both statuses)."""
    made: dict[type[ClaimgraphError], list[ClaimgraphError]] = {
        errors.SchemaError: [errors.SchemaError("s.yaml", [("edge_types[0]", "bad")])],
        errors.DecodeError: [errors.DecodeError("malformed", "not a record")],
        errors.VersionNotYetAvailable: [errors.VersionNotYetAvailable(9, 3, 0.5)],
        errors.VersionPruned: [errors.VersionPruned(1, 4)],
        errors.UnknownSlotError: [errors.UnknownSlotError("slot e(a)", "cf:1")],
        errors.IntegrityError: [errors.IntegrityError("differs", 3)],
        errors.RunNotFound: [errors.RunNotFound("run-1")],
        errors.AuthError: [
            errors.AuthError(Reason.UNAUTHENTICATED, "no token", 401),
            errors.AuthError(Reason.NOT_ADMIN, "not an admin", 403),
        ],
        errors.LimitError: [
            errors.LimitError("too_large", "--max-body", "the body has 3 MiB", 413),
            errors.LimitError("too_many", "--max-waits", "4 waits at once", 429),
        ],
    }
    return made[cls] if cls in made else [cls("boom")]


@pytest.mark.parametrize("name", sorted(DRAWN))
def test_each_error_answers_its_documented_http_status(name: str) -> None:
    """The HTTP app maps an error by its family to the status errors.py and README.md give,
    with a reason code of the decision records or of HTTP_REASONS."""
    known = set(HTTP_REASONS) | {r.value for r in Reason}
    statuses = set()
    for exc in _sample(TREE[name]):
        resp = error_problem(exc)
        body = json.loads(resp.body)
        assert body["status"] == resp.status_code and body["reason"] in known
        statuses.add(resp.status_code)
    assert statuses == DRAWN[name][2]


def test_every_family_has_its_reason_code() -> None:
    """problems.py maps each family (not a list of leaf classes) to a reason code."""
    assert {c.__name__ for c in _ERROR_REASONS} >= FAMILIES | {"ClaimgraphError"}


@pytest.mark.parametrize("name", sorted(DRAWN))
def test_cli_exits_with_the_family_code(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """claimgraph's main() turns each error into one line on stderr and its family's code."""
    (exc,) = _sample(TREE[name])[-1:]

    def failing() -> None:
        raise exc

    monkeypatch.setattr(cli_main, "app", failing)
    with pytest.raises(SystemExit) as e:
        cli_main.main()
    assert e.value.code == DRAWN[name][1]
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("claimgraph: error: ")


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("NotFoundError", errors.NotFoundError),
        ("RunNotFound", errors.NotFoundError),
        ("VersionNotYetAvailable", errors.VersionNotYetAvailable),
        ("VersionPruned", errors.VersionPruned),
        ("UnknownSlotError", errors.UnknownSlotError),
        ("AuthError", errors.AuthError),
        ("StorageError", errors.StorageError),
        ("FencedError", errors.FencedError),
        ("GovernorFenced", errors.FencedError),
        ("LimitError", errors.LimitError),
    ],
)
def test_sdk_raises_the_family_the_server_answered(
    name: str, family: type[ClaimgraphError]
) -> None:
    """Over HTTP the SDK raises the family the server mapped its error from."""
    for exc in _sample(TREE[name]):
        problem = error_problem(exc)
        resp = httpx.Response(problem.status_code, content=bytes(problem.body))
        with pytest.raises(family):
            HttpGraph._raise(resp)


# -- no exception classes outside the tree, no broad catches below the edges -----------------

# control-flow signals that never leave their module, and the Avro codec's own errors
NOT_IN_THE_TREE = {
    "claimgraph.core.governor.base.Refusal",
    "claimgraph.streams.kafka._Stuck",
    "claimgraph.core.rules._OverBudget",
    "claimgraph.core.avro.varints.AvroDecodeError",
    "claimgraph.core.avro.nodes.UnsupportedSchema",
}


def test_every_exception_class_is_in_errors_py() -> None:
    """No module but errors.py defines an exception class (named signals aside)."""
    found = set()
    for info in pkgutil.walk_packages(claimgraph.__path__, "claimgraph."):
        if info.name == "claimgraph.__main__":
            continue  # running it is the CLI
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == info.name
                and info.name != "claimgraph.errors"
            ):
                found.add(f"{info.name}.{name}")
    assert found == NOT_IN_THE_TREE


# The edges that may catch anything without re-raising: the CLI's main() (one line, exit 70)
# and the thread trampoline that hands a librdkafka call's exception to its caller.
EDGES = {
    ("cli/main.py", "main"),
    ("streams/kafka.py", "_bounded.run"),
    # the thin GET path answers before FastAPI's handlers: a bug is problem+json, as they do
    ("http/thin.py", "ThinReads.__call__"),
}


def _handlers(tree: ast.Module) -> list[tuple[str, ast.ExceptHandler]]:
    """Every except clause with the dotted name of the function it is directly in."""
    out: list[tuple[str, ast.ExceptHandler]] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                visit(child, f"{where}.{child.name}".lstrip("."))
                continue
            if isinstance(child, ast.ExceptHandler):
                out.append((where, child))
            visit(child, where)

    visit(tree, "")
    return out


def test_broad_catches_re_raise_below_the_edges() -> None:
    """An ``except Exception`` / ``BaseException`` / bare ``except`` below the edges must
    re-raise (cleanup, or sorting out what it meant to catch), never swallow."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        for where, node in _handlers(ast.parse(path.read_text(encoding="utf-8"))):
            broad = node.type is None or (
                isinstance(node.type, ast.Name) and node.type.id in ("Exception", "BaseException")
            )
            if not broad or (rel, where) in EDGES:
                continue
            reraises = any(
                isinstance(n, ast.Raise) and n.exc is None
                for stmt in node.body
                for n in ast.walk(stmt)
            )
            if not reraises:
                offenders.append(f"{rel}:{node.lineno} in {where}()")
    assert offenders == []


# -- what the narrowed catches mean ----------------------------------------------------------


def test_rocksdb_failures_become_storage_errors(tmp_path: Path) -> None:
    """rocksdict's bare Exception (a held lock) and DbClosedError are StorageErrors; a bug of
    ours inside the same block (a str key in raw mode) goes through unchanged."""
    db = Rdict(str(tmp_path / "db"), Options(raw_mode=True))
    try:
        locked = pytest.raises(StorageError, match=r"db: it is in use by another claimgraph")
        with locked, rocksdb_errors(f"cannot open {tmp_path / 'db'}"):
            Rdict(str(tmp_path / "db"), Options(raw_mode=True))
        with pytest.raises(KeyError), rocksdb_errors("put"):
            db.put("not bytes", b"x")  # type: ignore[arg-type]
        assert estimated_keys(db) == 0
    finally:
        db.close()
    closed = pytest.raises(StorageError, match="get: DB instance already closed")
    with closed, rocksdb_errors("get"):
        db.get(b"k")


def test_cel_failures_are_rule_errors_and_bugs_are_not() -> None:
    """A CEL parse error is a problem line; an evaluation error (even a stack exhausted by
    nesting) is a RuleError; an activation that is not JSON-like is our bug and propagates."""
    assert compile_cel("1 +") is not None
    deep = "(" * 200 + "1" + ")" * 200
    assert compile_cel(deep) is None
    with pytest.raises(errors.RuleError):
        evaluate(deep, {})
    with pytest.raises(errors.RuleError):
        evaluate("c.missing == 1", {"c": {"x": 1}})
    with pytest.raises(ValueError):
        evaluate("c == 1", {"c": object()})
