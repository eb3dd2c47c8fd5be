"""Command options declared once, as fields of a frozen dataclass (like dbt's flags table).

A field is one option: its name is the parameter name, its annotation the type, its
default the default, and ``option(...)`` adds the flags, the help, the check of its value
and the actions that accept it. From the dataclass come the typer parameters of the
command (``command_signature``), the copy of the command line into the dataclass
(``arguments_from``), the checks run before anything else (``check_values``) and the
first column of the option table in docs/architecture.md (``doc_heading``; a test
compares them).

No ``from __future__ import annotations`` in the modules that declare options: the field
types are read as objects (string annotations would cost an eval each at every start).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, TypeVar

import typer

T = TypeVar("T")

_ANNOTATED: Any = Annotated
"""``Annotated`` over a type known only when the program runs (mypy checks it statically)."""

SPEC = "gluon.option"
"""The key of an option's ``OptionSpec`` in its dataclass field's metadata."""

Check = Callable[[str, Any], object]
"""Refuses a bad value (raises ``UsageError``); called with the option's flag and value."""


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """What a dataclass field adds to make it a command-line option."""

    flags: tuple[str, ...]
    help: str | Callable[[], str]
    """A callable for help built from a registry (the values it lists cannot drift)."""
    accepted_by: frozenset[StrEnum]
    """The actions that use the option (empty: a command without actions)."""
    names_action: StrEnum | None = None
    """The action this option chooses when given (at most one per command line)."""
    check: Check | None = None
    sets: str | None = None
    """The field of the service's options this one sets (``CompactionOptions``); the
    compaction method flags all set ``method``, each to the method its help names."""
    typer_options: tuple[tuple[str, Any], ...] = ()
    """More ``typer.Option`` arguments (``metavar``, ``case_sensitive``, ``show_default``)."""

    @property
    def flag(self) -> str:
        """The flag messages name (the longest)."""
        return max(self.flags, key=len)

    def help_text(self) -> str:
        return self.help if isinstance(self.help, str) else self.help()


def option(
    *flags: str,
    help: str | Callable[[], str],
    default: Any = dataclasses.MISSING,
    accepted_by: Iterable[StrEnum] = (),
    names_action: StrEnum | None = None,
    check: Check | None = None,
    sets: str | None = None,
    **typer_options: Any,
) -> Any:
    """A dataclass field that is a command-line option (``default`` omitted: required)."""
    spec = OptionSpec(
        flags=flags,
        help=help,
        accepted_by=frozenset(accepted_by),
        names_action=names_action,
        check=check,
        sets=sets,
        typer_options=tuple(typer_options.items()),
    )
    return dataclasses.field(default=default, metadata={SPEC: spec})


@dataclass(frozen=True, slots=True)
class Declared:
    """One declared option: the field's name, type and default with its ``OptionSpec``."""

    name: str
    type: Any
    default: Any
    spec: OptionSpec

    @property
    def required(self) -> bool:
        return self.default is dataclasses.MISSING


def declared_options(cls: type) -> Iterator[Declared]:
    """The options ``cls`` declares, in declaration order (fields without a spec are not)."""
    for field in dataclasses.fields(cls):
        spec = field.metadata.get(SPEC)
        if spec is None:
            continue
        if isinstance(field.type, str):  # typer would take the text for the type
            raise TypeError(
                f"{cls.__name__}.{field.name}: its type is the string {field.type!r}; declare "
                "options in a module without `from __future__ import annotations`"
            )
        yield Declared(field.name, field.type, field.default, spec)


def command_signature(
    cls: type, *, extra: Iterable[tuple[str, Any, Any]] = ()
) -> inspect.Signature:
    """The signature typer reads a command's options from: a ``ctx`` parameter, the options
    of ``cls``, then ``extra`` (name, ``Annotated`` type, default), such as ``--verbose``."""
    parameters = [
        inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
    ]
    for declared in declared_options(cls):
        spec = declared.spec
        typer_option = typer.Option(*spec.flags, help=spec.help_text(), **dict(spec.typer_options))
        annotation = _ANNOTATED[declared.type, typer_option]
        default = inspect.Parameter.empty if declared.required else declared.default
        parameters.append(
            inspect.Parameter(
                declared.name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=annotation,
                default=default,
            )
        )
    for name, annotation, default in extra:
        parameters.append(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
            )
        )
    return inspect.Signature(parameters)


def given_flags(context: typer.Context) -> dict[str, str]:
    """The parameters typed on the command line (not defaults), in declaration order: name
    -> its longest flag (the one messages name)."""
    return {
        parameter.name: max(getattr(parameter, "opts", [parameter.name]), key=len)
        for parameter in context.command.params
        if parameter.name is not None
        and getattr(context.get_parameter_source(parameter.name), "name", None) == "COMMANDLINE"
    }


def arguments_from(cls: type[T], values: dict[str, Any], **more: Any) -> T:
    """An instance of ``cls`` from a command's values (those it does not declare are left out)."""
    names = {declared.name for declared in declared_options(cls)}
    return cls(**{name: value for name, value in values.items() if name in names}, **more)


def check_values(arguments: object) -> None:
    """Run each declared option's check on its value, in declaration order.

    Raises:
        UsageError: from the first check that refuses its value.
    """
    for declared in declared_options(type(arguments)):
        if declared.spec.check is not None:
            declared.spec.check(declared.spec.flag, getattr(arguments, declared.name))


def doc_heading(flags: Iterable[str], name: str) -> str:
    """An option as the option tables of docs/architecture.md name it:
    ``-t``, ``--table`` (``table``)."""
    return ", ".join(f"`{flag}`" for flag in flags) + f" (`{name}`)"
