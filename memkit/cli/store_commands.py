"""The commands on the store: put, get, search, delete, history, export, import, forget-user, windows, health.

A command that changes memory passes `committed=` (what it changed) to `emit`, so a report that
cannot be written is told apart from a refusal (exit code 3, not 2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..forgetting import drop_window, forget_user, window_status
from ..store import Store
from ..store.files import write_private
from ..window.places import url_place
from .options import CliError, cli_approvals, require_confirm, store_for
from .output import emit


def cmd_put(args: argparse.Namespace) -> None:
    require_confirm(args, "put")
    with store_for(args) as store:
        confirmation = cli_approvals(store).confirm_put(args.kind, args.key, args.value)
        record = store.put(args.user, args.session, args.kind, args.key, args.value, confirmation=confirmation.id)
        emit(record, committed=f"{args.user}'s {args.kind} {args.key!r} saved at revision {record['revision']}")


def cmd_get(args: argparse.Namespace) -> None:
    with store_for(args) as store:
        emit(store.get(args.user, args.kind, args.key))


def cmd_search(args: argparse.Namespace) -> None:
    if args.by_meaning:
        from .semantic_commands import cmd_search_by_meaning

        return cmd_search_by_meaning(args)
    with store_for(args) as store:
        emit(store.search(args.user, args.query, limit=args.limit, kind=args.kind_filter))


def cmd_delete(args: argparse.Namespace) -> None:
    require_confirm(args, "delete")
    with store_for(args) as store:
        confirmation = cli_approvals(store).confirm_delete(args.kind, args.key)
        deleted = store.delete(args.user, args.kind, args.key, session=args.session, confirmation=confirmation.id)
        emit({"deleted": deleted},
              committed=f"{args.user}'s {args.kind} {args.key!r} deleted" if deleted else None)


def cmd_history(args: argparse.Namespace) -> None:
    with store_for(args) as store:
        emit(store.history(args.user, args.kind, args.key))


def _check_export_target(out: Path, store: Store, force: bool) -> None:
    """Refuse an output path that is one of the store's own files, or an existing file without --force."""
    target = out.resolve()
    for own in store.files():
        same_inode = own.exists() and out.exists() and os.path.samefile(own, out)
        if target == own.resolve() or same_inode:
            raise CliError(f"--out {out} is the database's own file {own.name}; writing the export there would "
                           "destroy every user's memory. Choose another path")
    if out.is_dir():
        raise CliError(f"--out {out} is a folder; give a file path")
    if (out.exists() or out.is_symlink()) and not force:
        raise CliError(f"--out {out} exists; pass --force to replace it")


def _nothing_stored(store: Store, user: str, what: str) -> CliError:
    """The refusal for a user of whom nothing is stored: a mistyped --user is said, not done "successfully".

    Only this user is named, never who else the store holds (that would tell one user of another)."""
    return CliError(f"nothing stored for user {user!r} in {store.location}; {what}. Check --user (ids are "
                    "case-sensitive)")


def cmd_export(args: argparse.Namespace) -> None:
    with store_for(args) as store:
        if not any(store.exportable(args.user).values()):  # what a bundle carries
            raise _nothing_stored(store, args.user, "no record, history or session item to export; nothing was "
                                  "written")
        if args.out is not None:
            out = Path(args.out)
            _check_export_target(out, store, args.force)
            bundle = store.export_user(args.user)
            write_private(out, bundle.encode("utf-8"))
            header = json.loads(bundle.split("\n", 1)[0])
            # Bundles carry no proposals (they are questions about this store's records): say how
            # many of the user's stay behind, waiting here.
            emit({"user": args.user, "written": args.out, "records": header["records"],
                  "items": header.get("items", 0), "proposals_left_out": len(store.proposals(args.user))})
        else:
            sys.stdout.write(store.export_user(args.user))


def cmd_import(args: argparse.Namespace) -> None:
    require_confirm(args, "import")
    bundle = Path(args.file)
    if not bundle.is_file():
        raise CliError(f"there is no bundle file at {bundle}")
    with store_for(args) as store:
        # A store that keeps vectors writes the imported records' with them (`vectors` in the result).
        result = store.import_records(bundle, user=args.as_user)
        report = {**result, "proposals_imported": 0}  # bundles carry none (see Store.export_user)
        emit(report, committed=f"a bundle imported: {json.dumps(result)}")


def cmd_forget_user(args: argparse.Namespace) -> None:
    """Forget the user in the store, its own window and every Redis window the store recorded
    (`memkit.forgetting`), this shell's `REDIS_URL` included."""
    require_confirm(args, "forget-user")
    with store_for(args) as store:
        url = os.environ.get("REDIS_URL") or None
        here = [url_place(url)] if url else []  # a window opened before the store recorded its places
        report = forget_user(store, args.user, places=here, gone=args.window_gone or (), redis_url=url)
        if not any(report["removed"].values()) and not report["dropped_windows"]:
            # Nothing removed anywhere (records, history, conversations, proposals, every window):
            # nothing was changed either, and "forgotten" would hide a mistyped --user.
            raise _nothing_stored(store, args.user, "no record, history, conversation, proposal or window "
                                  "turn; nothing was forgotten")
        dropped = "".join(f"; {entry['window']} no longer recorded" for entry in report["dropped_windows"])
        dropped += "".join(f"; {entry['window']} skipped (named gone, never recorded)"
                           for entry in report["skipped_windows"])
        emit(report, committed=f"user {args.user!r} forgotten: {json.dumps(report['removed'])}{dropped}")


def cmd_windows(args: argparse.Namespace) -> None:
    """List the window places the store recorded and whether each answers; with `--drop PLACE
    --confirm`, stop recording one that is gone for good (refused while it answers)."""
    url = os.environ.get("REDIS_URL") or None
    if args.drop is None:  # a look: the store opened read-only, no window opened or started
        with store_for(args, read_only=True) as store:
            emit({"windows": window_status(store, redis_url=url)})
        return
    require_confirm(args, f"dropping the window place {args.drop!r}")
    with store_for(args) as store:
        report = drop_window(store, args.drop, redis_url=url)
        emit(report, committed=f"{report['dropped']} no longer recorded")


def cmd_health(args: argparse.Namespace) -> None:
    with store_for(args) as store:
        emit(store.health())
