"""Which ``offload`` options each action takes: an option an action would ignore is refused.

``offload`` is one command with many actions (the spec's single-command
style). Silently ignoring an option misleads: ``--offload-predicate`` given
with ``--incremental-updates-enabled`` on an offloaded table offloads nothing,
and a compaction option given to an extraction changes nothing. Each option
says which actions accept it where it is declared (``accepted_by`` in
``gluon/cli/offload_options.py``); the tables below are read from there, and
anything else given on the command line is refused in one line (exit 2)
before any change. The function that runs each action is in
``gluon/cli/offload_actions.py``.
"""

from __future__ import annotations

from gluon.cli.declare import declared_options
from gluon.cli.offload_options import Action, OffloadArguments
from gluon.errors import UsageError

__all__ = [
    "ACCEPTED",
    "ACTION_FLAGS",
    "COMMON",
    "CONSOLE",
    "ONE_ACTION",
    "Action",
    "OffloadArguments",
    "chosen_actions",
    "refuse_ignored_options",
]

CONSOLE = frozenset({"verbose", "debug"})
"""How a command shows its work (``gluon/cli/options.py``): every command takes them."""

ACCEPTED: dict[Action, frozenset[str]] = {
    action: frozenset(
        declared.name
        for declared in declared_options(OffloadArguments)
        if action in declared.spec.accepted_by
    )
    for action in Action
}
"""The options each action takes (parameter names of ``gluon.cli.offload.offload``)."""

COMMON = CONSOLE | frozenset.intersection(*ACCEPTED.values())
"""Options every action takes."""

ACTION_FLAGS: dict[str, Action] = {
    declared.name: Action(declared.spec.names_action)
    for declared in declared_options(OffloadArguments)
    if declared.spec.names_action is not None
}
"""The flags that name an action (at most one per command); none names an offload."""

ONE_ACTION = "use only one of " + ", ".join(
    declared.spec.flag
    for declared in declared_options(OffloadArguments)
    if declared.spec.names_action is not None
)


def chosen_actions(arguments: OffloadArguments) -> list[Action]:
    """The actions the command line names with a flag (an offload has none)."""
    return [action for name, action in ACTION_FLAGS.items() if getattr(arguments, name)]


def refuse_ignored_options(
    arguments: OffloadArguments, action: Action, *, also: Action | None = None
) -> None:
    """Refuse the first option given on the command line that ``action`` (nor ``also``, the
    second action of a command running two) does not use.

    Raises:
        UsageError: names the option and the action.
    """
    accepted = COMMON | ACCEPTED[action] | (ACCEPTED[also] if also else frozenset())
    for name, flag in arguments.given.items():
        if name not in accepted:
            doing = f"{action.value} or {also.value}" if also else action.value
            raise UsageError(f"{flag} does nothing with {doing}: remove it")
