#!/usr/bin/env python3
"""Conformance checker for kesoku's LLM backend payloads.

Validates JSON request bodies and response fixtures of the backends
(Anthropic Messages, OpenAI Chat Completions, Gemini generateContent, OpenAI
Responses) against the official Python SDKs' own types (versions pinned in
requirements.txt).  Azure OpenAI's bodies are OpenAI's: its Chat Completions
bodies sit in openai/, its Responses bodies in openai_responses/.

    python3 tools/conformance/check.py --requests DIR_A --responses DIR_B
    python3 tools/conformance/check.py --self-test

Each DIR holds subfolders anthropic/, openai/, gemini/, openai_responses/
with *.json files.  A request body with "stream": true is checked against the
SDK's streaming params type, any other against the non-streaming one.
Response files named error_*.json are provider error bodies; files named
malformed_*.json are skipped (deliberately invalid JSON) but counted.
A response folder's stream/ subfolder holds recorded streams (*.sse): each
event is checked against the SDK's stream event type (Anthropic
RawMessageStreamEvent, OpenAI ChatCompletionChunk, Gemini
GenerateContentResponse, OpenAI Responses ResponseStreamEvent; error events
against the error body), and the
*.json beside them are the one-shot responses of the same replies.

Why not pydantic.TypeAdapter on the request TypedDicts: it validates Iterable
fields lazily (i.e. not at all), lets unknown keys pass and may see no required
keys.  So this module walks the SDK annotations itself (``StrictValidator``),
and proves on every run, with known-bad payloads, that the walk rejects them.

Checks beyond the SDK's Python types are marked in their messages:
  "wire rule: ..."     a documented constraint of the HTTP API that the SDK
                       type cannot express (e.g. OpenAI file_data data URL,
                       Gemini 'Required.' fields typed Optional in the SDK);
  "conversation: ..."  cross-message rules (tool_use -> tool_result pairing).
Exit codes: 0 all good, 1 a check or the self-test failed, 2 usage error.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import collections.abc as cabc
import copy
import datetime
import difflib
import enum
import functools
import json
import re
import sys
import typing
import warnings
from pathlib import Path

try:
    import typing_extensions as te
    import pydantic
    import anthropic.types as a_types
    from anthropic.types import message_create_params as a_params
    import openai.types as o_types
    import openai.types.chat as o_chat
    from openai.types.chat import completion_create_params as o_params
    import openai.types.responses as r_types
    from openai.types.responses import response_create_params as r_params
    from google.genai import types as g_types
except ImportError as exc:  # pragma: no cover - environment problem
    print(f"conformance: missing dependency ({exc}); run "
          "`pip install -r tools/conformance/requirements.txt`", file=sys.stderr)
    sys.exit(2)

PROVIDERS = ("anthropic", "openai", "gemini", "openai_responses")
Issue = typing.Tuple[tuple, str]  # (JSON path as a tuple of keys and indexes, message)

# --------------------------------------------------------------------------
# small helpers


def fmt_path(path: tuple) -> str:
    out = ""
    for seg in path:
        if isinstance(seg, int):
            out += f"[{seg}]"
        elif re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$-]*", str(seg)):
            out += ("." if out else "") + str(seg)
        else:
            out += f"[{json.dumps(seg)}]"
    return out or "(root)"


def jtype(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def short(v, n: int = 40) -> str:
    try:
        s = json.dumps(v, ensure_ascii=False)
    except (TypeError, ValueError):
        s = repr(v)
    return s if len(s) <= n else s[: n - 1] + "…"


def one_of(values, limit: int = 12) -> str:
    vals = [short(v, 80) for v in dict.fromkeys(values)]
    more = f", … ({len(vals) - limit} more)" if len(vals) > limit else ""
    return ", ".join(vals[:limit]) + more


def snake(k: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", k).lower()


def camel(k: str) -> str:
    head, *rest = k.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def unknown_key_msg(key: str, allowed, owner: str) -> str:
    allowed = list(allowed)
    msg = f"unknown key (not in {owner})"
    for variant in (camel(key), snake(key)):
        if variant != key and variant in allowed:
            return msg + f"; did you mean {variant!r}?"
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.75)
    if close:
        msg += f"; did you mean {close[0]!r}?"
    return msg


def strict_b64(s: str) -> bool:
    """Standard-alphabet base64 with correct padding (what Anthropic/OpenAI take)."""
    if not isinstance(s, str) or not s or len(s) % 4:
        return False
    try:
        base64.b64decode(s, validate=True)
        return True
    except (binascii.Error, ValueError):
        return False


_ANNOTATED = {typing.Annotated, te.Annotated}
_REQUIRED = {typing.Required, te.Required}
_NOT_REQUIRED = {typing.NotRequired, te.NotRequired}
_READ_ONLY = {x for x in (getattr(typing, "ReadOnly", None), getattr(te, "ReadOnly", None)) if x}
_LITERAL = {typing.Literal, te.Literal}
_UNION = {typing.Union} | ({getattr(__import__("types"), "UnionType")} if hasattr(__import__("types"), "UnionType") else set())
_LIST_ORIGINS = {list, tuple, set, frozenset, cabc.Iterable, cabc.Sequence, cabc.MutableSequence,
                 cabc.Collection, cabc.Set, cabc.MutableSet, cabc.Iterator}
_DICT_ORIGINS = {dict, cabc.Mapping, cabc.MutableMapping}


def strip(tp):
    """Unwrap Annotated / Required / NotRequired / ReadOnly / type aliases.
    Returns (inner type, required marker or None, annotated metadata)."""
    marker, metas = None, []
    while True:
        if hasattr(te, "TypeAliasType") and isinstance(tp, te.TypeAliasType):
            tp = tp.__value__
            continue
        origin = te.get_origin(tp)
        if origin in _ANNOTATED:
            metas.extend(getattr(tp, "__metadata__", ()))
            tp = tp.__origin__
        elif origin in _REQUIRED:
            marker, tp = True, te.get_args(tp)[0]
        elif origin in _NOT_REQUIRED:
            marker, tp = False, te.get_args(tp)[0]
        elif origin in _READ_ONLY:
            tp = te.get_args(tp)[0]
        else:
            return tp, marker, metas


def is_model(tp) -> bool:
    return isinstance(tp, type) and issubclass(tp, pydantic.BaseModel)


def describe_arms(arms, depth: int = 0) -> str:
    arms = [strip(a)[0] for a in arms]
    structs = [a.__name__ for a in arms if te.is_typeddict(a) or is_model(a)]
    others = list(dict.fromkeys(describe(a, depth + 1) for a in arms
                                if not (te.is_typeddict(a) or is_model(a))))
    if len(structs) > 1:
        shown = " | ".join(structs[:4]) + (f" | … ({len(structs) - 4} more)" if len(structs) > 4 else "")
        others.append(f"object ({shown})")
    elif structs:
        others.append(f"object ({structs[0]})")
    return " | ".join(others)


def describe(tp, depth: int = 0) -> str:
    tp, _, _ = strip(tp)
    origin = te.get_origin(tp)
    if tp is type(None) or tp is None:
        return "null"
    if tp in (typing.Any, object):
        return "any"
    if tp is str:
        return "string"
    if tp is bool:
        return "boolean"
    if tp is int:
        return "integer"
    if tp is float:
        return "number"
    if tp is bytes:
        return "base64 string"
    if origin in _LITERAL:
        return " | ".join(short(a) for a in te.get_args(tp))
    if origin in _UNION:
        return describe_arms(te.get_args(tp), depth)
    if origin in _LIST_ORIGINS or tp in (list, tuple):
        args = te.get_args(tp)
        if depth > 1 or not args:
            return "array"
        inner = describe(args[0], depth + 1)
        return f"array of ({inner})" if " " in inner else f"array of {inner}"
    if origin in _DICT_ORIGINS or tp is dict:
        return "object"
    if te.is_typeddict(tp) or is_model(tp):
        return f"object ({tp.__name__})"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return f"{tp.__name__} value"
    return getattr(tp, "__name__", str(tp))


# --------------------------------------------------------------------------
# the strict validator


class _ModelInfo:
    def __init__(self, cls):
        try:
            cls.model_rebuild(raise_errors=False)
        except Exception:
            pass
        self.by_wire: dict = {}
        self.by_name: dict = {}
        for name, f in cls.model_fields.items():
            alias = f.validation_alias if isinstance(f.validation_alias, str) else (f.alias or name)
            self.by_wire[alias] = (name, f.annotation, f.is_required(), (f.description or "").strip())
            self.by_name[name] = alias
        cfg = cls.model_config
        self.by_name_ok = bool(cfg.get("populate_by_name") or cfg.get("validate_by_name"))


class StrictValidator:
    """Recursive validator over SDK type annotations (TypedDicts, pydantic
    models, Literal, Union, containers, scalars).  Rejects unknown keys, missing
    required keys, wrong JSON types (bool is not int, int is fine for float),
    and checks every element of every Iterable eagerly."""

    # pydantic error types that the walk itself already reports (avoid dupes)
    DUP_ERRORS = {"extra_forbidden", "missing", "literal_error", "union_tag_invalid",
                  "union_tag_not_found", "model_type", "model_attributes_type", "dict_type",
                  "list_type", "string_type", "int_type", "int_parsing", "int_from_float",
                  "float_type", "float_parsing", "bool_type", "bool_parsing", "enum",
                  "is_instance_of", "string_sub_type", "none_required", "bytes_type"}

    def __init__(self, provider: str, kind: str, namespaces=(), hooks=None,
                 sdk_only=(), renames=None, camel_case_only=False, doc_required=False):
        self.provider = provider
        self.kind = kind  # "request" | "response"
        self.namespaces = [vars(m) if not isinstance(m, dict) else m for m in namespaces]
        self.hooks = hooks or {}
        self.sdk_only = set(sdk_only)
        self.renames = renames or {}
        self.camel_case_only = camel_case_only
        self.doc_required = doc_required
        self._td = {}
        self._models = {}
        self._lits = {}
        self._model_depth = 0

    # -- type resolution ---------------------------------------------------
    def resolve(self, tp, ns=None):
        if isinstance(tp, str):
            tp = typing.ForwardRef(tp)
        if isinstance(tp, typing.ForwardRef):
            name = tp.__forward_arg__
            spaces = []
            mod = getattr(tp, "__forward_module__", None)
            if mod and mod in sys.modules:
                spaces.append(vars(sys.modules[mod]))
            if ns is not None:
                spaces.append(ns)
            spaces.extend(self.namespaces)
            for space in spaces:
                try:
                    return eval(name, dict(space))  # noqa: S307 - SDK annotation text
                except Exception:
                    continue
            raise TypeError(f"unresolved forward reference {name!r}")
        return tp

    def td_fields(self, td):
        if td in self._td:
            return self._td[td]
        mod_ns = vars(sys.modules[td.__module__]) if td.__module__ in sys.modules else None
        try:
            hints = typing.get_type_hints(td, include_extras=True)
        except Exception:
            hints = {k: self.resolve(v, mod_ns) for k, v in td.__annotations__.items()}
        totality = self._totality(td)
        fields = {}
        for key, ann in hints.items():
            inner, marker, metas = strip(ann)
            required = totality.get(key, getattr(td, "__total__", True)) if marker is None else marker
            wire = key
            for m in metas:  # Stainless PropertyInfo(alias=...) renames a key on the wire
                alias = getattr(m, "alias", None)
                if type(m).__name__ == "PropertyInfo" and isinstance(alias, str) and alias:
                    wire = alias
            fields[wire] = (ann, bool(required))
        self._td[td] = (fields, mod_ns)
        return self._td[td]

    def _totality(self, td) -> dict:
        out: dict = {}
        for base in getattr(td, "__orig_bases__", ()):
            if te.is_typeddict(base):
                out.update(self._totality(base))
        for key in getattr(td, "__annotations__", {}):
            out.setdefault(key, getattr(td, "__total__", True))
        return out

    def model_info(self, cls) -> _ModelInfo:
        if cls not in self._models:
            self._models[cls] = _ModelInfo(cls)
        return self._models[cls]

    def literal_keys(self, tp, ns=None):
        """{key: allowed literal values} of a struct's required Literal keys,
        or None when tp is not a struct (used to pick union arms)."""
        tp, _, _ = strip(self.resolve(tp, ns))
        if tp in self._lits:
            return self._lits[tp]
        out = None
        if te.is_typeddict(tp):
            out = {}
            fields, _ = self.td_fields(tp)
            for key, (ann, req) in fields.items():
                inner, _, _ = strip(ann)
                if req and te.get_origin(inner) in _LITERAL:
                    out[key] = te.get_args(inner)
        elif is_model(tp):
            out = {}
            for wire, (_, ann, req, _) in self.model_info(tp).by_wire.items():
                inner, _, _ = strip(ann)
                if req and te.get_origin(inner) in _LITERAL:
                    out[wire] = te.get_args(inner)
        try:
            self._lits[tp] = out
        except TypeError:
            pass
        return out

    # -- entry point -------------------------------------------------------
    def check(self, tp, value, path: tuple = (), ns=None) -> list:
        tp = self.resolve(tp, ns)
        tp, _, _ = strip(tp)
        tp = self.resolve(tp, ns)
        origin = te.get_origin(tp)

        if tp is typing.Any or tp is object:
            return []
        if tp is None or tp is type(None):
            return [] if value is None else [(path, f"expected null, got {jtype(value)}")]
        if origin in _UNION:
            return self.check_union(te.get_args(tp), value, path, ns)
        if origin in _LITERAL:
            args = te.get_args(tp)
            if any(type(value) is type(a) and value == a for a in args):
                return []
            return [(path, f"{short(value)} is not one of {one_of(args)}")]
        if origin in _LIST_ORIGINS or tp in (list, tuple, set, frozenset):
            if not isinstance(value, list):
                what = "a string" if isinstance(value, str) else jtype(value)
                return [(path, f"expected an array, got {what}")]
            args = te.get_args(tp)
            if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
                if len(args) != len(value):
                    return [(path, f"expected an array of {len(args)} items, got {len(value)}")]
                out = []
                for i, (a, v) in enumerate(zip(args, value)):
                    out += self.check(a, v, path + (i,), ns)
                return out
            elem = args[0] if args else typing.Any
            out = []
            for i, v in enumerate(value):
                out += self.check(elem, v, path + (i,), ns)
            return out
        if origin in _DICT_ORIGINS or tp is dict:
            if not isinstance(value, dict):
                return [(path, f"expected an object, got {jtype(value)}")]
            args = te.get_args(tp)
            if len(args) != 2:
                return []
            out = []
            for k, v in value.items():
                out += self.check(args[1], v, path + (k,), ns)
            return out
        if te.is_typeddict(tp):
            return self.check_typeddict(tp, value, path)
        if is_model(tp):
            return self.check_model(tp, value, path)
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return self.check_enum(tp, value, path)
        if tp is bool:
            return [] if isinstance(value, bool) else [(path, f"expected a boolean, got {jtype(value)}")]
        if tp is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return []
            return [(path, f"expected an integer, got {jtype(value)} {short(value, 20)}")]
        if tp is float:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return []
            return [(path, f"expected a number, got {jtype(value)} {short(value, 20)}")]
        if tp is str:
            return [] if isinstance(value, str) else [(path, f"expected a string, got {jtype(value)}")]
        if tp is bytes:  # JSON carries bytes as base64 text; pydantic checks the text
            return [] if isinstance(value, str) else [(path, f"expected a base64 string, got {jtype(value)}")]
        if tp in (datetime.datetime, datetime.date, datetime.time):
            return [] if isinstance(value, str) else [(path, f"expected a timestamp string, got {jtype(value)}")]
        if isinstance(tp, typing.TypeVar):
            return []
        if origin is typing.IO or tp is typing.IO or (isinstance(tp, type) and tp.__module__ in ("os", "io", "typing")):
            return [(path, f"{describe(tp)} cannot be expressed in JSON")]
        # last resort: let pydantic judge an annotation we do not model
        try:
            pydantic.TypeAdapter(tp).validate_python(value, strict=True)
            return []
        except pydantic.ValidationError as e:
            return [(path + tuple(x["loc"]), x["msg"]) for x in e.errors()]
        except Exception as e:
            return [(path, f"checker cannot validate annotation {tp!r}: {e}")]

    # -- unions ------------------------------------------------------------
    def _flatten(self, arms, ns):
        out = []
        for a in arms:
            a, _, _ = strip(self.resolve(a, ns))
            if te.get_origin(a) in _UNION:
                out.extend(self._flatten(te.get_args(a), ns))
            else:
                out.append(a)
        return out

    def check_union(self, arms, value, path, ns):
        arms = self._flatten(arms, ns)
        if value is None and type(None) in arms:
            return []
        candidates = []  # (discriminator matches, arm)
        rejected_by = {}  # discriminator key -> allowed values across struct arms
        for a in arms:
            lits = self.literal_keys(a, ns) if isinstance(value, dict) else None
            if lits is None:
                candidates.append((0, a))
                continue
            score, ok = 0, True
            for key, allowed in lits.items():
                if key in value:
                    if any(type(value[key]) is type(x) and value[key] == x for x in allowed):
                        score += 1
                    else:
                        ok = False
                        rejected_by.setdefault(key, []).extend(allowed)
            if ok:
                candidates.append((score, a))
        if isinstance(value, dict) and rejected_by and not any(self._takes_object(a, ns) for _, a in candidates):
            key = max(rejected_by, key=lambda k: len(rejected_by[k]))
            return [(path + (key,), f"{short(value.get(key))} is not one of {one_of(rejected_by[key])}")]
        results = []
        for score, a in candidates:
            issues = self.check(a, value, path, ns)
            if not issues:
                return []
            results.append((score, a, issues))
        if not results:
            return [(path, f"expected {describe_arms(arms)}, got {jtype(value)}")]
        depth = len(path)
        if value is not None:  # the null arm of an Optional says nothing useful
            non_null = [r for r in results if r[1] is not type(None)]
            if len(non_null) == 1:
                return non_null[0][2]
            results = non_null or results
            arms = [a for a in arms if a is not type(None)]
        if all(len(iss) == 1 and len(iss[0][0]) == depth for _, _, iss in results):
            # every arm failed at this level: say what was expected in one line
            lit_vals = [v for a in arms if te.get_origin(a) in _LITERAL for v in te.get_args(a)
                        if jtype(v) == jtype(value)]
            if lit_vals:
                return [(path, f"{short(value)} is not one of {one_of(lit_vals)}")]
            return [(path, f"expected {describe_arms(arms, 1)}, got {jtype(value)}")]

        def closeness(r):
            score, _, iss = r
            return (score, min(len(p) for p, _ in iss), -len(iss))
        return max(results, key=closeness)[2]

    def _takes_object(self, a, ns) -> bool:
        a, _, _ = strip(self.resolve(a, ns))
        origin = te.get_origin(a)
        return (a in (typing.Any, object, dict) or origin in _DICT_ORIGINS
                or te.is_typeddict(a) or is_model(a))

    # -- structs -----------------------------------------------------------
    def check_typeddict(self, td, value, path):
        if not isinstance(value, dict):
            return [(path, f"expected an object ({td.__name__}), got {jtype(value)}")]
        fields, mod_ns = self.td_fields(td)
        out = []
        for key in value:
            if key not in fields:
                out.append((path + (key,), unknown_key_msg(key, fields, td.__name__)))
        for key, (ann, required) in fields.items():
            if key in value:
                out += self.check(ann, value[key], path + (key,), mod_ns)
            elif required:
                out.append((path + (key,), "missing required key"))
        hook = self.hooks.get(td)
        if hook:
            out += hook(self, value, path)
        return out

    def check_model(self, cls, value, path):
        if not isinstance(value, dict):
            return [(path, f"expected an object ({cls.__name__}), got {jtype(value)}")]
        info = self.model_info(cls)
        mod_ns = vars(sys.modules[cls.__module__]) if cls.__module__ in sys.modules else None
        renames = self.renames.get(cls, {})
        out, seen = [], set()
        top = self._model_depth == 0
        self._model_depth += 1
        try:
            for key, v in value.items():
                p = path + (key,)
                if key in info.by_wire:
                    wire = key
                elif key in renames:
                    wire = renames[key]
                elif info.by_name_ok and key in info.by_name:
                    wire = info.by_name[key]
                    if self.camel_case_only:
                        out.append((p, f"snake_case key; the REST API uses camelCase {wire!r}"))
                        continue
                elif (self.kind == "response" and OPTIONS["allow_extra_response_keys"]
                      and cls.model_config.get("extra") == "allow"):
                    continue  # what the SDK model itself does
                else:
                    out.append((p, unknown_key_msg(key, info.by_wire, cls.__name__)))
                    continue
                name, ann, _, _ = info.by_wire[wire]
                if (cls, name) in self.sdk_only:
                    out.append((p, "SDK-only field, never sent over the wire"))
                    continue
                seen.add(name)
                out += self.check(ann, v, p, mod_ns)
            for wire, (name, ann, required, doc) in info.by_wire.items():
                if name in seen:
                    continue
                if required:
                    out.append((path + (wire,), "missing required key"))
                elif self.doc_required and doc.startswith("Required."):
                    out.append((path + (wire,), f"wire rule: missing key that the SDK documents as "
                                                 f"'Required.' ({cls.__name__}.{name})"))
            hook = self.hooks.get(cls)
            if hook:
                out += hook(self, value, path)
        finally:
            self._model_depth -= 1
        if top:
            out += self.pydantic_issues(cls, value, path, strict_clean=not out)
        return out

    def pydantic_issues(self, cls, value, path, strict_clean: bool) -> list:
        """Run the SDK's own model_validate (validators, base64 bytes, ...)."""
        out = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                cls.model_validate(copy.deepcopy(value))
            except pydantic.ValidationError as e:
                for err in e.errors():
                    if not strict_clean and err["type"] in self.DUP_ERRORS:
                        continue
                    out.append((path + self._loc_to_path(value, err["loc"]), f"{err['msg']} [SDK]"))
            except Exception as e:  # e.g. google's enum _missing_ on non-strings
                if strict_clean:
                    out.append((path, f"SDK {cls.__name__}.model_validate crashed: {type(e).__name__}: {e}"))
        if strict_clean:
            for w in caught:
                out.append((path, f"SDK warning: {w.message}"))
        return out

    @staticmethod
    def _loc_to_path(value, loc) -> tuple:
        """pydantic locs contain union tags / class names; keep real JSON steps."""
        out, cur = [], value
        for i, seg in enumerate(loc):
            if isinstance(cur, list) and isinstance(seg, int) and 0 <= seg < len(cur):
                out.append(seg)
                cur = cur[seg]
            elif isinstance(cur, dict) and seg in cur:
                out.append(seg)
                cur = cur[seg]
            elif i == len(loc) - 1:
                out.append(seg)
        return tuple(out)

    def check_enum(self, cls, value, path):
        members = [m.value for m in cls]  # declared members only
        if value in members and type(value) is type(members[0]):
            return []
        ci = any(b.__name__ == "CaseInSensitiveEnum" for b in cls.__mro__)
        if ci and isinstance(value, str) and any(isinstance(m, str) and m.upper() == value.upper() for m in members):
            return []
        return [(path, f"{short(value)} is not a valid {cls.__name__} (one of {one_of(members)})")]


# --------------------------------------------------------------------------
# wire rules that the SDK types cannot express


def _tool_param_rule(v, value, path):
    schema = value.get("input_schema")
    if isinstance(schema, dict) and schema.get("type") != "object":
        return [(path + ("input_schema", "type"), 'wire rule: input_schema must have type "object"')]
    return []


def _anthropic_b64_rule(v, value, path):
    data = value.get("data")
    if isinstance(data, str) and value.get("type") == "base64":
        if data.startswith("data:"):
            return [(path + ("data",), "wire rule: base64 data must not be a data: URL")]
        if not strict_b64(data):
            return [(path + ("data",), "wire rule: data is not valid padded standard base64")]
    return []


def _openai_file_rule(v, value, path):
    data = value.get("file_data")
    if isinstance(data, str):
        m = re.fullmatch(r"data:([\w.+-]+/[\w.+-]+);base64,(.*)", data, re.S)
        if not m:
            return [(path + ("file_data",), "wire rule: file_data must be a data URL "
                                             "'data:<mime>;base64,<data>' (the SDK docstring says plain base64, "
                                             "the API rejects that)")]
        if not strict_b64(m.group(2)):
            return [(path + ("file_data",), "wire rule: file_data payload is not valid base64")]
    return []


def _openai_audio_rule(v, value, path):
    data = value.get("data")
    if isinstance(data, str) and not strict_b64(data):
        return [(path + ("data",), "wire rule: input_audio.data must be plain base64 (no data: URL)")]
    return []


_OPENAI_FN_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_GEMINI_FN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}")


def _openai_fn_rule(v, value, path):
    name = value.get("name")
    if isinstance(name, str) and not _OPENAI_FN_NAME.fullmatch(name):
        return [(path + ("name",), f"wire rule: function name {name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$")]
    return []


_GEMINI_PART_DATA = ("text", "inlineData", "functionCall", "functionResponse", "fileData",
                     "executableCode", "codeExecutionResult", "toolCall", "toolResponse")


def _gemini_part_rule(v, value, path):
    present = [k for k in _GEMINI_PART_DATA if k in value or snake(k) in value]
    if len(present) > 1:
        return [(path, f"wire rule: a part holds exactly one of its data fields, got {present}")]
    if not present and v.kind == "request":
        return [(path, f"wire rule: a part needs one data field ({', '.join(_GEMINI_PART_DATA[:5])}, …)")]
    return []


def _gemini_content_rule(v, value, path):
    role = value.get("role")
    if role is not None and role not in ("user", "model"):
        return [(path + ("role",), f"{short(role)} is not one of \"user\", \"model\" (SDK doc: "
                                   "Must be either 'user' or 'model')")]
    return []


def _gemini_call_rule(v, value, path):
    if v.kind == "request" and "name" not in value:
        return [(path + ("name",), "wire rule: a functionCall sent back needs its name")]
    return []


def _gemini_decl_rule(v, value, path):
    out = []
    for a, b in (("parameters", "parametersJsonSchema"), ("response", "responseJsonSchema")):
        if a in value and b in value:
            out.append((path, f"{a!r} and {b!r} are mutually exclusive"))
    name = value.get("name")
    if isinstance(name, str) and not _GEMINI_FN_NAME.fullmatch(name):
        out.append((path + ("name",), f"wire rule: function name {name!r} must match "
                                      "^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$ (SDK doc)"))
    return out


# --------------------------------------------------------------------------
# provider checks


@functools.lru_cache(maxsize=None)
def anthropic_validator(kind):
    hooks = {a_types.ToolParam: _tool_param_rule,
             a_types.Base64ImageSourceParam: _anthropic_b64_rule,
             a_types.Base64PDFSourceParam: _anthropic_b64_rule}
    return StrictValidator("anthropic", kind, namespaces=[a_types, a_params], hooks=hooks)


@functools.lru_cache(maxsize=None)
def openai_validator(kind):
    from openai.types.chat import chat_completion_content_part_param as cp
    from openai.types.chat import chat_completion_content_part_input_audio_param as ap
    from openai.types.shared_params import FunctionDefinition
    hooks = {cp.FileFile: _openai_file_rule, ap.InputAudio: _openai_audio_rule,
             FunctionDefinition: _openai_fn_rule}
    return StrictValidator("openai", kind, namespaces=[o_chat, o_types, o_params], hooks=hooks)


@functools.lru_cache(maxsize=None)
def gemini_validator(kind):
    hooks = {g_types.Part: _gemini_part_rule, g_types.Content: _gemini_content_rule,
             g_types.FunctionCall: _gemini_call_rule, g_types.FunctionDeclaration: _gemini_decl_rule}
    sdk_only = {(g_types.GenerateContentResponse, n)
                for n in ("sdk_http_response", "automatic_function_calling_history", "parsed")}
    renames = {g_types.CitationMetadata: {"citationSources": "citations"}}
    return StrictValidator("gemini", kind, namespaces=[g_types], hooks=hooks, sdk_only=sdk_only,
                           renames=renames, camel_case_only=True, doc_required=True)


def _require_object(body):
    return [] if isinstance(body, dict) else [((), f"expected a JSON object, got {jtype(body)}")]


# Removed from the SDK's request types in anthropic 1.0 as deprecated API
# parameters; the API still honours them for older models (the SDK's
# MIGRATION.md says to send them via extra_body).  Accepted with a note.
ANTHROPIC_EXTRA_BODY = {"temperature": float, "top_p": float, "top_k": int}


def check_anthropic_request(body):
    if not isinstance(body, dict):
        return _require_object(body)
    v = anthropic_validator("request")
    body, issues = dict(body), []
    for key, tp in ANTHROPIC_EXTRA_BODY.items():
        if key in body:
            issues += v.check(tp, body.pop(key), (key,))
            NOTES.append(f"{key} is not in anthropic {a_version()} types (deprecated API parameter, "
                         "only older models honour it)")
    issues += v.check(a_params.MessageCreateParamsNonStreaming, body)
    return issues or anthropic_conversation(body)


def check_openai_request(body):
    streaming = isinstance(body, dict) and body.get("stream") is True
    issues = _require_object(body) or openai_validator("request").check(
        o_params.CompletionCreateParamsStreaming if streaming else o_params.CompletionCreateParamsNonStreaming,
        body)
    return issues or openai_conversation(body)


# --------------------------------------------------------------------------
# OpenAI Responses (and Azure's)


def _responses_image_rule(v, value, path):
    url = value.get("image_url")
    if isinstance(url, str) and url.startswith("data:"):
        m = re.fullmatch(r"data:(image/[\w.+-]+);base64,(.*)", url, re.S)
        if not m or not strict_b64(m.group(2)):
            return [(path + ("image_url",), "wire rule: an image data URL must be "
                                             "'data:image/<type>;base64,<padded base64>'")]
    return []


@functools.lru_cache(maxsize=None)
def responses_validator(kind):
    from openai.types.responses import response_input_file_param as fp
    hooks = {r_types.FunctionToolParam: _openai_fn_rule,
             fp.ResponseInputFileParam: _openai_file_rule,
             r_types.ResponseInputImageParam: _responses_image_rule}
    from openai.types import shared_params
    return StrictValidator("openai_responses", kind,
                           namespaces=[r_types, r_params, shared_params, o_types], hooks=hooks)


def check_responses_request(body):
    if not isinstance(body, dict):
        return _require_object(body)
    streaming = body.get("stream") is True
    tp = r_params.ResponseCreateParamsStreaming if streaming else r_params.ResponseCreateParamsNonStreaming
    issues = responses_validator("request").check(tp, body)
    return issues or responses_conversation(body)


def responses_conversation(body):
    """Rules of the API the SDK types cannot express: every function_call
    answered by a function_call_output after it (and no output without its
    call, unless the request goes on from a stored response); a reasoning
    item directly followed by the item it belongs with; stateless
    (store: false) reasoning carrying its encrypted content."""
    items = body.get("input")
    if not isinstance(items, list):
        return []
    out, calls, answered = [], {}, set()
    chained = bool(body.get("previous_response_id"))
    stateless = body.get("store") is False
    for i, item in enumerate(items):
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "function_call":
            calls[item.get("call_id")] = i
        elif kind == "function_call_output":
            cid = item.get("call_id")
            if cid not in calls and not chained:
                out.append((("input", i, "call_id"), f"conversation: {cid!r} answers no function_call "
                                                      "before it"))
            answered.add(cid)
        elif kind == "reasoning":
            nxt = items[i + 1] if i + 1 < len(items) else None
            nkind = nxt.get("type", "message" if "role" in nxt else None) if nxt else None
            if nxt is None or nkind in ("function_call_output",) or nxt.get("role") in ("user", "system", "developer"):
                out.append((("input", i), "wire rule: a reasoning item must be directly followed by the "
                                          "output item it belongs with"))
            if stateless and not item.get("encrypted_content"):
                out.append((("input", i), "wire rule: with store: false a reasoning item needs its "
                                          "encrypted_content (else 'Item with id ... not found')"))
    for cid, i in calls.items():
        if cid not in answered and i != len(items) - 1:
            later = [it for it in items[i + 1:] if it.get("type") != "function_call"
                     and it.get("type") != "reasoning"]
            if later:
                out.append((("input", i), f"conversation: function_call {cid!r} has no "
                                          "function_call_output (400 'No tool output found')"))
    return out


def check_responses_response(body):
    return _require_object(body) or responses_validator("response").check(r_types.Response, body)


def check_responses_stream(events):
    v = responses_validator("response")
    # The error event is one of the stream's events (flat {code, message}).
    return _check_stream(events, lambda d: v.check(r_types.ResponseStreamEvent, d),
                         lambda d: v.check(r_types.ResponseErrorEvent, d))


GEMINI_REQUEST_KEYS = {
    "contents": typing.List[g_types.Content],
    "systemInstruction": g_types.Content,
    "tools": typing.List[g_types.Tool],  # each Tool validates its FunctionDeclarations
    "toolConfig": g_types.ToolConfig,
    "generationConfig": g_types.GenerationConfig,
}


def check_gemini_request(body):
    if not isinstance(body, dict):
        return _require_object(body)
    issues = []
    for key in body:
        if key not in GEMINI_REQUEST_KEYS:
            issues.append(((key,), unknown_key_msg(key, GEMINI_REQUEST_KEYS, "the generateContent body "
                                                   "checked here")))
    if "contents" not in body:
        issues.append((("contents",), "missing required key"))
    elif isinstance(body["contents"], list) and not body["contents"]:
        issues.append((("contents",), "wire rule: contents must not be empty"))
    for key, tp in GEMINI_REQUEST_KEYS.items():
        if key not in body:
            continue
        v = gemini_validator("request")
        if te.get_origin(tp) is list:  # validate element by element (own SDK call each)
            if not isinstance(body[key], list):
                issues.append(((key,), f"expected an array, got {jtype(body[key])}"))
                continue
            for i, item in enumerate(body[key]):
                issues += v.check(te.get_args(tp)[0], item, (key, i))
        else:
            issues += v.check(tp, body[key], (key,))
    return issues or gemini_conversation(body["contents"])


def check_anthropic_response(body):
    return _require_object(body) or anthropic_validator("response").check(a_types.Message, body)


def check_openai_response(body):
    return _require_object(body) or openai_validator("response").check(o_chat.ChatCompletion, body)


def check_gemini_response(body):
    return _require_object(body) or gemini_validator("response").check(g_types.GenerateContentResponse, body)


def check_anthropic_error(body):
    # {"type":"error","error":{"type","message"},"request_id"?} -- anthropic.types.ErrorResponse
    return _require_object(body) or anthropic_validator("response").check(a_types.ErrorResponse, body)


class _OpenAIErrorBody(typing.TypedDict):
    error: o_types.ErrorObject  # {message, type, code?, param?}


def check_openai_error(body):
    return _require_object(body) or openai_validator("response").check(_OpenAIErrorBody, body)


# google.rpc.Code names and their HTTP statuses (the Gemini SDK has no error model)
GOOGLE_STATUS = {"OK": 200, "CANCELLED": 499, "UNKNOWN": 500, "INVALID_ARGUMENT": 400,
                 "DEADLINE_EXCEEDED": 504, "NOT_FOUND": 404, "ALREADY_EXISTS": 409,
                 "PERMISSION_DENIED": 403, "UNAUTHENTICATED": 401, "RESOURCE_EXHAUSTED": 429,
                 "FAILED_PRECONDITION": 400, "ABORTED": 409, "OUT_OF_RANGE": 400,
                 "UNIMPLEMENTED": 501, "INTERNAL": 500, "UNAVAILABLE": 503, "DATA_LOSS": 500}


class _GeminiErrorDetail(typing.TypedDict):
    code: int
    message: str
    status: str
    details: te.NotRequired[typing.List[typing.Dict[str, object]]]


class _GeminiErrorBody(typing.TypedDict):
    error: _GeminiErrorDetail


def check_gemini_error(body):
    issues = _require_object(body) or StrictValidator("gemini", "response").check(_GeminiErrorBody, body)
    if issues:
        return issues
    err = body["error"]
    status, code = err["status"], err["code"]
    if status not in GOOGLE_STATUS:
        return [(("error", "status"), f"{status!r} is not a google.rpc.Code name ({one_of(GOOGLE_STATUS)})")]
    if GOOGLE_STATUS[status] != code:
        return [(("error", "code"), f"HTTP code {code} does not match status {status} "
                                    f"(expected {GOOGLE_STATUS[status]})")]
    return []


# --------------------------------------------------------------------------
# conversation rules (run only once the types are right)


def anthropic_conversation(body):
    out, msgs = [], body.get("messages", [])
    for i, m in enumerate(msgs):
        content = m.get("content")
        if m.get("role") != "assistant" or not isinstance(content, list):
            continue
        uses = [b.get("id") for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
        if not uses:
            continue
        nxt = msgs[i + 1] if i + 1 < len(msgs) else None
        if nxt is None or nxt.get("role") != "user" or not isinstance(nxt.get("content"), list):
            out.append((("messages", i), "conversation: tool_use blocks need a tool_result in the next "
                                         "(user) message"))
            continue
        blocks = nxt["content"]
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        for uid in uses:
            if uid not in results:
                out.append((("messages", i + 1), f"conversation: no tool_result for tool_use id {uid!r}"))
        seen_other = False
        for j, b in enumerate(blocks):
            if b.get("type") == "tool_result":
                if seen_other:
                    out.append((("messages", i + 1, "content", j), "conversation: tool_result blocks "
                                                                   "must come first in the message"))
                    break
            else:
                seen_other = True
    for i, m in enumerate(msgs):
        content = m.get("content")
        if m.get("role") != "user" or not isinstance(content, list):
            continue
        prev = msgs[i - 1] if i > 0 else {}
        prev_ids = [b.get("id") for b in prev.get("content", []) if isinstance(b, dict)
                    and b.get("type") == "tool_use"] if isinstance(prev.get("content"), list) else []
        for j, b in enumerate(content):
            if b.get("type") == "tool_result" and b.get("tool_use_id") not in prev_ids:
                out.append((("messages", i, "content", j, "tool_use_id"),
                            f"conversation: {b.get('tool_use_id')!r} is not a tool_use id of the "
                            "previous assistant message"))
    return out


def openai_conversation(body):
    out, msgs = [], body.get("messages", [])
    pending: dict = {}
    for i, m in enumerate(msgs):
        role = m.get("role")
        if role == "tool":
            tid = m.get("tool_call_id")
            if tid not in pending:
                out.append((("messages", i, "tool_call_id"), f"conversation: {tid!r} answers no pending "
                                                             "tool_call of the preceding assistant message"))
            pending.pop(tid, None)
            continue
        if pending:
            out.append((("messages", i), "conversation: missing tool message(s) for tool_call id(s) "
                                         f"{sorted(pending)} before this message"))
            pending = {}
        if role == "assistant":
            for call in m.get("tool_calls") or []:
                pending[call.get("id")] = i
    if pending:
        out.append((("messages",), f"conversation: tool_call id(s) {sorted(pending)} have no tool message"))
    return out


def gemini_conversation(contents):
    out = []
    for i, c in enumerate(contents):
        parts = c.get("parts") or []
        calls = [p["functionCall"] for p in parts if "functionCall" in p]
        if c.get("role") != "model" or not calls:
            continue
        nxt = contents[i + 1] if i + 1 < len(contents) else None
        if nxt is None:
            out.append((("contents", i), "conversation: functionCall parts need a following user "
                                         "content with functionResponse parts"))
            continue
        resps = [p["functionResponse"] for p in nxt.get("parts") or [] if "functionResponse" in p]
        if len(resps) != len(calls):
            out.append((("contents", i + 1), f"conversation: {len(calls)} functionCall part(s) but "
                                             f"{len(resps)} functionResponse part(s) (Gemini returns 400)"))
        elif sorted(str(x.get("name")) for x in calls) != sorted(str(x.get("name")) for x in resps):
            out.append((("contents", i + 1), "conversation: functionResponse names do not match the calls"))
        call_ids = {x.get("id") for x in calls if x.get("id")}
        for j, r in enumerate(resps):
            if r.get("id") and call_ids and r["id"] not in call_ids:
                out.append((("contents", i + 1), f"conversation: functionResponse id {r['id']!r} "
                                                 "matches no functionCall id"))
    return out


def parse_sse(text: str):
    """The events of a server-sent event stream: (event name or "", data), CRLF or LF."""
    events = []
    for block in re.split(r"\r?\n\r?\n", text.strip()):
        name, data = "", []
        for line in re.split(r"\r?\n", block):
            if line.startswith("event:"):
                name = line[len("event:"):].strip()
            elif line.startswith("data:"):
                data.append(line[len("data:"):].removeprefix(" "))
        if data:
            events.append((name, "\n".join(data)))
    return events


def _check_stream(events, one_event, error):
    """Each event's data against the SDK's stream event type (errors against the error body)."""
    issues = []
    if not events:
        return [((), "no events")]
    for i, (name, data) in enumerate(events):
        # OpenAI's end marker; Anthropic's keep-alive, which its SDK skips by name.
        if data == "[DONE]" or name == "ping":
            continue
        try:
            value = json.loads(data)
        except ValueError as e:
            issues.append(((i,), f"event data is not JSON: {e}"))
            continue
        is_error = name == "error" or (isinstance(value, dict) and "error" in value and "type" not in value)
        check = error if is_error else one_event
        issues += [((i,) + path, msg) for path, msg in check(value)]
    return issues


def check_anthropic_stream(events):
    v = anthropic_validator("response")
    return _check_stream(events, lambda d: v.check(a_types.RawMessageStreamEvent, d), check_anthropic_error)


def check_openai_stream(events):
    v = openai_validator("response")
    return _check_stream(events, lambda d: v.check(o_chat.ChatCompletionChunk, d), check_openai_error)


def check_gemini_stream(events):
    v = gemini_validator("response")
    return _check_stream(events, lambda d: v.check(g_types.GenerateContentResponse, d), check_gemini_error)


CHECKS = {
    ("anthropic", "stream"): check_anthropic_stream,
    ("openai", "stream"): check_openai_stream,
    ("gemini", "stream"): check_gemini_stream,
    ("openai_responses", "stream"): check_responses_stream,
    ("openai_responses", "request"): check_responses_request,
    ("openai_responses", "response"): check_responses_response,
    ("openai_responses", "error"): check_openai_error,
    ("anthropic", "request"): check_anthropic_request,
    ("openai", "request"): check_openai_request,
    ("gemini", "request"): check_gemini_request,
    ("anthropic", "response"): check_anthropic_response,
    ("openai", "response"): check_openai_response,
    ("gemini", "response"): check_gemini_response,
    ("anthropic", "error"): check_anthropic_error,
    ("openai", "error"): check_openai_error,
    ("gemini", "error"): check_gemini_error,
}


NOTES: list = []  # non-failing remarks gathered by the current run_check
OPTIONS = {"allow_extra_response_keys": False}


def a_version():
    import anthropic
    return anthropic.__version__


def run_check(provider, kind, body, notes=None):
    """Return a list of 'path: message' strings (empty = conforms)."""
    NOTES.clear()
    try:
        issues = CHECKS[(provider, kind)](body)
    except Exception as e:  # a checker bug must not pass a file silently
        return [f"checker crashed: {type(e).__name__}: {e}"]
    seen, out = set(), []
    for path, msg in issues:
        line = f"{fmt_path(path)}: {msg}"
        if line not in seen:
            seen.add(line)
            out.append(line)
    if notes is not None:
        notes.extend(dict.fromkeys(NOTES))
    return out


# --------------------------------------------------------------------------
# self-test: good payloads must pass, known-bad mutations must fail

PNG_1PX = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA"
           "60e6kgAAAABJRU5ErkJggg==")


def good_anthropic_request():
    return {
        "model": "claude-sonnet-4-6", "max_tokens": 1024, "system": "You are terse.",
        "tools": [{"name": "get_weather", "description": "Weather for a city",
                   "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                                    "required": ["city"]}}],
        "tool_choice": {"type": "auto"},
        "messages": [
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "timeout", "is_error": True},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_1PX}}]},
        ],
    }


def good_openai_request():
    return {
        "model": "gpt-4o", "max_completion_tokens": 512, "tool_choice": "auto",
        "tools": [{"type": "function", "function": {
            "name": "get_weather", "description": "Weather for a city", "strict": True,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"], "additionalProperties": False}}}],
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": [
                {"type": "text", "text": "Weather?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PNG_1PX}},
                {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0xLjQK",
                                          "filename": "a.pdf"}},
                {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
        ],
    }


def good_gemini_request():
    return {
        "systemInstruction": {"parts": [{"text": "You are terse."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Weather?"},
                                       {"inlineData": {"mimeType": "image/png", "data": PNG_1PX}}]},
            {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                                         "thoughtSignature": "CiQBjDk5aGVsbG8="}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "get_weather",
                                                             "response": {"output": "18C"}}}]},
        ],
        "tools": [{"functionDeclarations": [{"name": "get_weather", "description": "Weather",
                                             "parametersJsonSchema": {"type": "object", "properties": {
                                                 "city": {"type": "string"}}}}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
        "generationConfig": {"maxOutputTokens": 256, "temperature": 0.2},
    }


def good_anthropic_response():
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
            "content": [{"type": "text", "text": "hi"},
                        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}],
            "stop_reason": "tool_use", "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5}}


def good_openai_response():
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "gpt-4o",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None,
                         "message": {"role": "assistant", "content": None, "refusal": None,
                                     "tool_calls": [{"id": "call_1", "type": "function",
                                                     "function": {"name": "f", "arguments": "{}"}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def good_gemini_response():
    return {"candidates": [{"content": {"role": "model", "parts": [
                {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "CiQBjDk5"}]},
                "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": "gemini-3-pro", "responseId": "r1"}


def good_responses_request():
    return {
        "model": "gpt-5", "instructions": "You are terse.", "max_output_tokens": 256,
        "store": False, "include": ["reasoning.encrypted_content"], "tool_choice": "auto",
        "tools": [{"type": "function", "name": "get_weather", "description": "Weather for a city",
                   "strict": False,
                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                  "required": ["city"]}},
                  {"type": "web_search"}],
        "text": {"format": {"type": "json_schema", "name": "Answer", "strict": True,
                            "schema": {"type": "object", "properties": {"a": {"type": "string"}},
                                       "required": ["a"], "additionalProperties": False}}},
        "input": [
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "Weather?"},
                {"type": "input_image", "image_url": "data:image/png;base64," + PNG_1PX, "detail": "auto"},
                {"type": "input_file", "file_data": "data:application/pdf;base64,JVBERi0xLjQK",
                 "filename": "a.pdf"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"},
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
             "arguments": "{\"city\": \"Paris\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
        ],
    }


def good_responses_response():
    return {"id": "resp_1", "object": "response", "created_at": 1754000000, "model": "gpt-5",
            "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "output": [{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"},
                       {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
                        "arguments": "{}", "status": "completed"}],
            "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                      "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 3},
                      "total_tokens": 15}}


def _mut(fn):
    def apply(body):
        body = copy.deepcopy(body)
        fn(body)
        return body
    return apply


def _set(path, value):
    def fn(body):
        cur = body
        for seg in path[:-1]:
            cur = cur[seg]
        cur[path[-1]] = value
    return _mut(fn)


def _del(path):
    def fn(body):
        cur = body
        for seg in path[:-1]:
            cur = cur[seg]
        del cur[path[-1]]
    return _mut(fn)


SELF_TESTS = [
    # (provider, kind, good builder, [(label, mutation)])
    ("anthropic", "request", good_anthropic_request, [
        ("unknown key in a content block", _set(("messages", 1, "content", 0, "bogus"), 1)),
        ("role 'robot'", _set(("messages", 0, "role"), "robot")),
        ("tool_result without tool_use_id", _del(("messages", 2, "content", 0, "tool_use_id"))),
        ("string where a list is required (messages)", _set(("messages",), "hello")),
        ("string inside a nested Iterable of blocks", _set(("messages", 2, "content", 0, "content"), ["18C"])),
        ("string where list required (stop_sequences)", _set(("stop_sequences",), "END")),
        ("tool_result is_error 'yes'", _set(("messages", 2, "content", 1, "is_error"), "yes")),
        ("max_tokens as string", _set(("max_tokens",), "1024")),
        ("max_tokens as boolean", _set(("max_tokens",), True)),
        ("missing model", _del(("model",))),
        ("stream true on a non-streaming body", _set(("stream",), True)),
        ("image media_type image/bmp", _set(("messages", 2, "content", 2, "source", "media_type"), "image/bmp")),
        ("tool_choice type 'sometimes'", _set(("tool_choice",), {"type": "sometimes"})),
        ("tool_use input as a JSON string", _set(("messages", 1, "content", 1, "input"), "{}")),
        ("tool without input_schema", _del(("tools", 0, "input_schema"))),
        ("temperature as a string", _set(("temperature",), "0.2")),
        ("top_level 'temprature' typo", _set(("temprature",), 0.2)),
    ]),
    ("openai", "request", good_openai_request, [
        ("unknown key in a content part", _set(("messages", 1, "content", 0, "bogus"), 1)),
        ("role 'robot'", _set(("messages", 1, "role"), "robot")),
        ("tool message without tool_call_id", _del(("messages", 3, "tool_call_id"))),
        ("string where a list is required (tool_calls)", _set(("messages", 2, "tool_calls"), "call_1")),
        ("tool message with is_error 'yes'", _set(("messages", 3, "is_error"), "yes")),
        ("tool_calls arguments as object", _set(("messages", 2, "tool_calls", 0, "function", "arguments"), {})),
        ("content part type 'video'", _set(("messages", 1, "content", 0, "type"), "video")),
        ("file part with file_data at the part level",
         _set(("messages", 1, "content", 2), {"type": "file", "file_data": "JVBERi0xLjQK"})),
        ("tool_choice in Responses-API shape", _set(("tool_choice",), {"type": "function", "name": "get_weather"})),
        ("tool_choice 'sometimes'", _set(("tool_choice",), "sometimes")),
        ("max_completion_tokens as string", _set(("max_completion_tokens",), "512")),
        ("tool without type", _del(("tools", 0, "type"))),
    ]),
    ("openai_responses", "request", good_responses_request, [
        ("function tool nested Chat-style", _set(("tools", 0), {"type": "function", "function": {
            "name": "get_weather", "parameters": {"type": "object"}}})),
        ("function tool without strict", _del(("tools", 0, "strict"))),
        ("Chat-style response_format", _set(("response_format",), {"type": "json_object"})),
        ("text.format nested Chat-style", _set(("text", "format"), {"type": "json_schema", "json_schema": {
            "name": "Answer", "schema": {"type": "object"}}})),
        ("function_call arguments as object", _set(("input", 3, "arguments"), {"city": "Paris"})),
        ("input_image without detail", _del(("input", 0, "content", 1, "detail"))),
        ("image_url as object (Chat shape)", _set(("input", 0, "content", 1, "image_url"), {"url": "x"})),
        ("input part type 'text' (Chat shape)", _set(("input", 0, "content", 0, "type"), "text")),
        ("reasoning without id", _del(("input", 1, "id"))),
        ("stateless reasoning without encrypted_content", _del(("input", 1, "encrypted_content"))),
        ("reasoning as the last item", _mut(lambda b: b["input"].append(
            {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "x"}))),
        ("function_call_output before its call", _mut(lambda b: b["input"].insert(1, b["input"].pop()))),
        ("function_call without its output", _mut(lambda b: b["input"].insert(
            4, {"type": "message", "role": "user", "content": "next"}) or b["input"].pop())),
        ("include 'reasoning.bogus'", _set(("include",), ["reasoning.bogus"])),
        ("max_output_tokens as string", _set(("max_output_tokens",), "256")),
        ("tool_choice Chat-style", _set(("tool_choice",), {"type": "function", "function": {"name": "x"}})),
        ("image data URL without base64", _set(("input", 0, "content", 1, "image_url"), "data:image/png,xx")),
        ("unknown top-level key", _set(("messages",), [])),
    ]),
    ("openai_responses", "response", good_responses_response, [
        ("status 'done'", _set(("status",), "done")),
        ("usage without input_tokens_details", _del(("usage", "input_tokens_details"))),
        ("function_call without call_id", _del(("output", 1, "call_id"))),
    ]),
    ("gemini", "request", good_gemini_request, [
        ("unknown key in a part (extra='forbid')", _set(("contents", 0, "parts", 0, "bogus"), 1)),
        ("snake_case key in a part", _mut(lambda b: b["contents"][1]["parts"][0].__setitem__(
            "function_call", b["contents"][1]["parts"][0].pop("functionCall")))),
        ("functionCall.args as a JSON string", _set(("contents", 1, "parts", 0, "functionCall", "args"), "{}")),
        ("thoughtSignature not base64", _set(("contents", 1, "parts", 0, "thoughtSignature"), "not base64!")),
        ("parts as a string", _set(("contents", 0, "parts"), "hello")),
        ("parameters and parametersJsonSchema together",
         _set(("tools", 0, "functionDeclarations", 0, "parameters"), {"type": "OBJECT"})),
        ("unknown top-level key", _set(("system_instruction",), {"parts": [{"text": "x"}]})),
        ("functionCallingConfig mode 'BOGUS'", _set(("toolConfig", "functionCallingConfig", "mode"), "BOGUS")),
        ("role 'robot'", _set(("contents", 0, "role"), "robot")),
        ("maxOutputTokens as string", _set(("generationConfig", "maxOutputTokens"), "256")),
        ("functionResponse without name", _del(("contents", 2, "parts", 0, "functionResponse", "name"))),
        ("a part with text and functionCall", _set(("contents", 1, "parts", 0, "text"), "x")),
    ]),
    ("anthropic", "response", good_anthropic_response, [
        ("typo stop_reson", _mut(lambda b: b.__setitem__("stop_reson", b.pop("stop_reason")))),
        ("stop_reason 'done'", _set(("stop_reason",), "done")),
        ("usage.input_tokens as string", _set(("usage", "input_tokens"), "10")),
    ]),
    ("openai", "response", good_openai_response, [
        ("missing created", _del(("created",))),
        ("message role 'robot'", _set(("choices", 0, "message", "role"), "robot")),
    ]),
    ("gemini", "response", good_gemini_response, [
        ("finishReason 'BOGUS'", _set(("candidates", 0, "finishReason"), "BOGUS")),
        ("snake_case usage_metadata", _mut(lambda b: b.__setitem__("usage_metadata", b.pop("usageMetadata")))),
        ("thoughtSignature not base64", _set(("candidates", 0, "content", "parts", 0, "thoughtSignature"), "@@")),
    ]),
    ("anthropic", "error", lambda: {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}, [
        ("error.type 'busy'", _set(("error", "type"), "busy")),
        ("missing message", _del(("error", "message"))),
    ]),
    ("openai", "error", lambda: {"error": {"message": "bad", "type": "invalid_request_error",
                                           "code": None, "param": None}}, [
        ("missing error.message", _del(("error", "message"))),
        ("top-level message instead of error", lambda b: {"message": "bad"}),
    ]),
    ("gemini", "error", lambda: {"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}}, [
        ("status 'BAD'", _set(("error", "status"), "BAD")),
        ("code as string", _set(("error", "code"), "400")),
        ("code/status mismatch", _set(("error", "code"), 500)),
    ]),
]


def _type_adapter_accepts(provider, body):
    """Would pydantic.TypeAdapter(<request TypedDict>) alone accept this body?"""
    tp = {"anthropic": a_params.MessageCreateParamsNonStreaming,
          "openai": o_params.CompletionCreateParamsNonStreaming,
          "openai_responses": r_params.ResponseCreateParamsNonStreaming}.get(provider)
    if tp is None:
        return None
    try:
        pydantic.TypeAdapter(tp).validate_python(body)
        return True
    except pydantic.ValidationError:
        return False
    except Exception:
        return None


def self_test(verbose: bool) -> bool:
    ok, goods, bads, lax = True, 0, 0, {}
    for provider, kind, build, mutations in SELF_TESTS:
        good = build()
        problems = run_check(provider, kind, good)
        if problems:
            ok = False
            print(f"self-test FAIL: good {provider} {kind} rejected: {'; '.join(problems)}", file=sys.stderr)
        else:
            goods += 1
            if verbose:
                print(f"self-test ok: good {provider} {kind} accepted")
        for label, mutate in mutations:
            bad = mutate(good)
            problems = run_check(provider, kind, bad)
            if not problems or any(p.startswith("(root): checker crashed") for p in problems):
                ok = False
                print(f"self-test FAIL: {provider} {kind} '{label}' was ACCEPTED (validator too lax)"
                      + (f": {problems}" if problems else ""), file=sys.stderr)
                continue
            bads += 1
            if verbose and kind == "request" and provider != "gemini":
                t = _type_adapter_accepts(provider, bad)
                lax.setdefault(provider, [0, 0])
                lax[provider][1] += 1
                if t:
                    lax[provider][0] += 1
            if verbose:
                print(f"self-test ok: {provider} {kind} rejects {label}: {problems[0]}"
                      + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""))
    if verbose:
        for provider, (acc, tot) in lax.items():
            print(f"self-test note: pydantic.TypeAdapter alone accepts {acc} of these {tot} bad "
                  f"{provider} requests")
    summary = f"self-test: {goods} good payloads accepted, {bads} bad payloads rejected"
    print(summary if ok else summary + " -- FAILED, the validator cannot be trusted",
          file=sys.stdout if verbose else sys.stderr)
    return ok


# --------------------------------------------------------------------------
# CLI


def _no_dupes(pairs):
    keys = [k for k, _ in pairs]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise ValueError(f"duplicate key(s) {dupes}")
    return dict(pairs)


def _bad_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def load_json(path: Path):
    text = path.read_text(encoding="utf-8")
    return json.loads(text, object_pairs_hook=_no_dupes, parse_constant=_bad_constant)


def collect(root: Path, kind: str):
    files = []
    for provider in PROVIDERS:
        d = root / provider
        if d.is_dir():
            files.extend((provider, kind, f) for f in sorted(d.glob("*.json")) if f.is_file())
            # Recorded streams: each event against the SDK's stream event type, and the
            # one-shot response of the same reply beside it.
            if kind == "response" and (d / "stream").is_dir():
                files.extend((provider, "stream", f) for f in sorted((d / "stream").glob("*.sse")))
                files.extend((provider, kind, f) for f in sorted((d / "stream").glob("*.json")))
    for extra in sorted(p.name for p in root.iterdir() if p.is_dir() and p.name not in PROVIDERS):
        print(f"conformance: ignoring unknown folder {root / extra}", file=sys.stderr)
    return files


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=Path, help="folder with anthropic/ openai/ gemini/ request bodies")
    ap.add_argument("--responses", type=Path, help="folder with anthropic/ openai/ gemini/ response fixtures")
    ap.add_argument("--self-test", action="store_true", help="only run the validator self-test")
    ap.add_argument("--allow-extra-response-keys", action="store_true",
                    help="accept unknown keys in Anthropic/OpenAI responses, as their SDK models "
                         "(extra='allow') do; by default they fail, to catch typos in fixtures")
    args = ap.parse_args(argv)

    if args.self_test:
        return 0 if self_test(verbose=True) else 1
    if not args.requests and not args.responses:
        ap.print_usage(sys.stderr)
        print("conformance: give --requests and/or --responses (or --self-test)", file=sys.stderr)
        return 2
    for d in (args.requests, args.responses):
        if d is not None and not d.is_dir():
            print(f"conformance: not a directory: {d}", file=sys.stderr)
            return 2
    if not self_test(verbose=False):
        return 1
    OPTIONS["allow_extra_response_keys"] = args.allow_extra_response_keys

    files = []
    if args.requests:
        files += collect(args.requests, "request")
    if args.responses:
        files += collect(args.responses, "response")
    if not files:
        print("conformance: nothing to check (no */*.json under the given folders)", file=sys.stderr)
        return 2

    passed = failed = skipped = 0
    for provider, kind, f in files:
        in_stream = f.parent.name == "stream" and kind != "stream"
        label = f"{provider}/{kind}/{'stream/' if in_stream else ''}{f.name}"
        if f.name.startswith("malformed_"):
            skipped += 1
            print(f"skip {label}")
            continue
        check_kind = "error" if kind == "response" and f.name.startswith("error_") else kind
        notes: list = []
        try:
            body = parse_sse(f.read_text(encoding="utf-8")) if kind == "stream" else load_json(f)
        except (ValueError, UnicodeDecodeError) as e:
            problems = [f"invalid JSON: {e}"]
        else:
            problems = run_check(provider, check_kind, body, notes)
        if problems:
            failed += 1
            shown = problems[:8] + ([f"(+{len(problems) - 8} more)"] if len(problems) > 8 else [])
            print(f"FAIL {label}: {'; '.join(shown)}")
        else:
            passed += 1
            print(f"ok   {label}" + (f"  (note: {'; '.join(notes)})" if notes else ""))
    line = f"conformance: {passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
