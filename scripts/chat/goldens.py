#!/usr/bin/python3
"""Renders testdata/chat/goldens.json: every chat template of
testdata/chat/templates/ over every conversation of
testdata/chat/conversations.json, by Python's jinja2 (Debian python3-jinja2;
scripts/setup.sh jinja) set up the way Hugging Face transformers renders
apply_chat_template:

  * a sandboxed environment with trim_blocks and lstrip_blocks and the
    loopcontrols extension ({% break %}, {% continue %});
  * a {% generation %} ... {% endgeneration %} block that renders its body;
  * tojson as json.dumps with ensure_ascii=False, sort_keys=False and its
    keyword arguments exposed (indent, separators, sort_keys, ensure_ascii);
  * raise_exception(msg) raising a TemplateError, strftime_now(fmt) (here at
    the fixed time "now" of conversations.json so the goldens are stable);
  * the template's special tokens (bos_token, eos_token) and the variables
    messages, tools, documents, add_generation_prompt plus a case's "vars".

core/chat's TestGoldens compares its own renderings with these byte for
byte, so they must come from this real Jinja, never from tessera. Run
`make chat-goldens` (or this script) after changing a template or a case;
`scripts/chat/goldens.py PATH` writes to PATH instead (TestGoldensUpToDate).
A case lists under "skip" the templates it does not apply to (inputs the
template's authors do not support, e.g. list content for a template written
for strings); any other failure of jinja2 stops the script.
"""
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DATA = os.path.join(ROOT, "testdata", "chat")


class Raised(Exception):
    """What raise_exception throws, told apart from Jinja's own errors."""


class Generation(jinja2.ext.Extension):
    """{% generation %}body{% endgeneration %}: the body, unchanged (the
    tag marks assistant text for training masks in transformers)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def environment(now):
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[jinja2.ext.loopcontrols, Generation])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise Raised(message)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: now.strftime(fmt)
    return env


def main():
    with open(os.path.join(DATA, "conversations.json"), encoding="utf-8") as f:
        spec = json.load(f)
    env = environment(datetime.datetime.fromisoformat(spec["now"]))
    results = []
    for tname, t in spec["templates"].items():
        with open(os.path.join(DATA, "templates", t["file"]), encoding="utf-8", newline="") as f:
            source = f.read()
        tmpl = env.from_string(source)
        for case in spec["cases"]:
            if tname in case.get("skip", {}):
                continue  # an input this template does not take (the reason is in the file)
            kw = dict(case.get("vars", {}))
            for k in ("bos_token", "eos_token"):
                if t.get(k) is not None:
                    kw[k] = t[k]
            r = {"template": tname, "case": case["name"]}
            try:
                r["output"] = tmpl.render(
                    messages=case["messages"], tools=case.get("tools"), documents=None,
                    add_generation_prompt=case["add_generation_prompt"], **kw)
            except Raised as e:  # raise_exception: Go must fail with this message
                r["raised"] = str(e)
            except Exception as e:
                sys.exit("%s on %s: %s: %s (an input it does not take: list it under the case's \"skip\")" % (
                    tname, case["name"], type(e).__name__, e))
            results.append(r)
    out = {
        "generator": "scripts/chat/goldens.py",
        "jinja2": jinja2.__version__,
        "results": results,
    }
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(DATA, "goldens.json")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n = sum("output" in r for r in results)
    print("%s: %d renderings, %d raise_exception (jinja2 %s)" % (os.path.relpath(path), n, len(results) - n, jinja2.__version__))


if __name__ == "__main__":
    sys.exit(main())
