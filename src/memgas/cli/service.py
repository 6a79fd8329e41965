"""The service's commands: ``memgas serve``, ``memgas keys create|list|revoke`` and ``memgas mcp``.

They import FastAPI, uvicorn and the MCP SDK only when run, and say which extra to install if missing.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, Callable

from memgas.cli.common import memgas_options, require_store, retention_periods
from memgas.core.errors import InvalidInputError, MemgasError

__all__ = ["add_service_parsers"]


def _need_extra(module: str) -> None:
    """Raise a one-line error naming the extra when ``module`` is not installed."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise MemgasError(f"this command needs {module}: pip install -e '.[server]' in the memgas checkout")


def _positive_number(text: str) -> float:
    """An argparse type: a finite number above 0 (leave the option out for no limit)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number (leave the option out for no limit)")
    return value


def _integer(low: int, high: int | None, what: str) -> Callable[[str], int]:
    """An argparse type: an integer from ``low`` to ``high`` (no upper bound when ``None``), named ``what``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{value} is not {what}")
        return value

    return parse


_positive_int = _integer(1, None, "a positive integer")
_port = _integer(0, 65535, "a port (0-65535)")  # 0: any free port


def open_or_create(args: argparse.Namespace) -> str:
    """Refuse a missing ``--db`` unless ``--create`` (a typo must not start a server where every user is 404);
    return the line that says which store is served and whether it is new (printed on stderr by the caller)."""
    from memgas.cli.common import store_file

    path = store_file(args.db)
    made = path is not None and not path.exists()
    if made and not args.create:
        require_store(args.db, create_flag=True)
    if path is not None and not made:
        require_store(args.db)  # an existing file that is no SQLite database is refused, untouched
    where = "in memory" if path is None and args.db in (":memory:", "sqlite://") else (
        str(path) if path is not None else args.db.split("@")[-1])
    return f"memgas: store {where}" + (" (created)" if made else "")


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the REST API (and MCP over HTTP at /mcp) until interrupted."""
    for module in ("fastapi", "uvicorn"):
        _need_extra(module)
    from memgas.core.retention import Retention
    from memgas.service.serve import ServeConfig, serve

    options = memgas_options(args.set)  # before the store is opened: a refused --set creates nothing
    retention = retention_periods(args.retention)
    Retention(args.retention_days, retention)  # checked here too: a worker would refuse it only once started
    announce = open_or_create(args)
    config = ServeConfig(db=args.db, method=args.method, llm=args.llm, supersession_check=args.supersession_check,
                         auth=not args.no_auth,
                         rate_limit=args.rate_limit, max_body=args.max_body, mcp=not args.no_mcp,
                         index_cache_mb=args.index_cache_mb, options=options, retention_days=args.retention_days,
                         retention=retention,
                         expire_every=args.expire_every,
                         **({} if args.idle_timeout is None else {"idle_timeout": args.idle_timeout}),
                         **({} if args.request_timeout is None else {"request_timeout": args.request_timeout}))
    serve(config, host=args.host, port=args.port, workers=args.workers, log_level=args.log_level, announce=announce)
    return 0


def _key_view(record: Any) -> dict[str, Any]:
    return {"key_id": record.key_id, "scope": "admin" if record.tenant is None else f"tenant:{record.tenant}",
            "users": None if record.users is None else list(record.users), "name": record.name,
            "created_at": record.created_at.isoformat(),
            "revoked_at": record.revoked_at.isoformat() if record.revoked_at else None}


def cmd_keys(args: argparse.Namespace) -> int:
    """Create, list or revoke API keys in the store (only a hash of each key is kept)."""
    from memgas.service.keys import create_key, revoke_key
    from memgas.store import KeyStore, open_store, part

    if args.keys_command != "create" or not args.create:  # 'create --create' may make a new store
        require_store(args.db, create_flag=args.keys_command == "create")
    with open_store(args.db) as store:
        if args.keys_command == "create":
            users = None if args.users is None else [u.strip() for u in args.users.split(",") if u.strip()]
            if args.users is not None and not users:
                raise InvalidInputError("--users needs at least one user id")
            key, record = create_key(part(store, KeyStore), args.scope, users=users, name=args.name)
            print(json.dumps({"key": key, **_key_view(record),
                              "note": "the key is shown only now; the store keeps a hash of it"}, indent=2))
        elif args.keys_command == "list":
            print(json.dumps([_key_view(record) for record in part(store, KeyStore).list_api_keys()], indent=2))
        else:
            print(json.dumps(_key_view(revoke_key(part(store, KeyStore), args.key_id)), indent=2))
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the MCP tools over stdio (for an MCP client that starts memgas as a subprocess)."""
    _need_extra("mcp")
    from memgas.service.mcp import run_stdio

    options = memgas_options(args.set)  # before the store is opened: a refused --set creates nothing
    print(open_or_create(args), file=sys.stderr)

    run_stdio(args, options)
    return 0


def add_service_parsers(sub: Any, common: Callable[..., None]) -> None:
    """Add ``serve``, ``keys`` and ``mcp`` to the ``memgas`` subcommands (``common`` adds --db/--method/--llm)."""
    sp = sub.add_parser("serve", help="run the REST API and MCP over HTTP (needs memgas[server])")
    common(sp, user=False)
    sp.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    sp.add_argument("--port", type=_port, default=8000, help="port (default 8000)")
    sp.add_argument("--workers", type=_positive_int, default=1, help="worker processes (more than 1 needs PostgreSQL)")
    sp.add_argument("--create", action="store_true", help="make --db when it does not exist (default: refuse)")
    sp.add_argument("--no-auth", action="store_true",
                    help="serve without API keys (loopback only; prints a warning)")
    sp.add_argument("--rate-limit", type=_positive_number, default=None, metavar="N",
                    help="requests per second allowed per API key (default: no limit)")
    sp.add_argument("--max-body", type=_positive_int, default=None, metavar="BYTES",
                    help="largest request body (default 8 MiB; larger bodies get 413)")
    sp.add_argument("--no-mcp", action="store_true", help="do not serve MCP at /mcp")
    sp.add_argument("--supersession-check", default=None, metavar="SPEC",
                    help="ask an LLM, 'llm:<LLM spec>' (e.g. llm:local), whether each replacement of a statement the "
                         "user model finds is one before the earlier statement leaves the profile (off by default)")
    sp.add_argument("--idle-timeout", type=_positive_number, default=None, metavar="SECONDS",
                    help="close a connection that sends nothing for this long (default 10 s)")
    sp.add_argument("--request-timeout", type=_positive_number, default=None, metavar="SECONDS",
                    help="close a connection whose request has not arrived whole (headers and body) this long after "
                         "its first byte, however slowly it trickles (default 30 s)")
    sp.add_argument("--index-cache-mb", type=_positive_number, default=None, metavar="MIB",
                    help="memory for the search indexes of each worker (default 1024 MiB; the least recently used "
                         "user's index goes first)")
    sp.add_argument("--retention-days", type=_positive_number, default=None, metavar="DAYS",
                    help="keep a session this many days from its time: older ones are never read and are deleted "
                         "on a schedule (default: keep everything)")
    sp.add_argument("--retention", action="append", default=[], metavar="user:ID=DAYS|tenant:NAME=DAYS",
                    help="a user's or a tenant's own period (a tenant's users: its API keys' users), before "
                         "--retention-days (repeatable)")
    sp.add_argument("--expire-every", type=_positive_number, default=3600.0, metavar="SECONDS",
                    help="how often the expired sessions (past their expires_at or --retention-days) are deleted "
                         "(default 3600)")
    sp.add_argument("--log-level", default="warning", help="uvicorn's log level (default warning)")
    sp.set_defaults(func=cmd_serve)

    sp = sub.add_parser("keys", help="create, list or revoke the server's API keys")
    keys = sp.add_subparsers(dest="keys_command", required=True)
    kp = keys.add_parser("create", help="create a key; it is printed once")
    common(kp, user=False)
    kp.add_argument("--scope", required=True, help="admin, or tenant:NAME (that tenant's users only)")
    kp.add_argument("--users", help="comma-separated user ids: a tenant key limited to these users")
    kp.add_argument("--name", default="", help="a label for the key")
    kp.add_argument("--create", action="store_true", help="make --db when it does not exist (default: refuse)")
    kp.set_defaults(func=cmd_keys)
    kp = keys.add_parser("list", help="list keys (ids, scopes, revocation; never the keys)")
    common(kp, user=False)
    kp.set_defaults(func=cmd_keys)
    kp = keys.add_parser("revoke", help="revoke a key by its id")
    common(kp, user=False)
    kp.add_argument("key_id", help="the id of the key to revoke (from 'memgas keys list')")
    kp.set_defaults(func=cmd_keys)

    sp = sub.add_parser("mcp", help="serve the MCP tools over stdio (needs memgas[server])")
    common(sp, user=False)
    sp.add_argument("--tenant", help="act as this tenant: its namespaced users only (default: every user)")
    sp.add_argument("--create", action="store_true", help="make --db when it does not exist (default: refuse)")
    sp.set_defaults(func=cmd_mcp)
