#!/usr/bin/env python3
"""A terminal UI for askbus: shows each pending question and sends back what you type, in
the encoding Gemini CLI's own dialog uses.

    python3 ui.py [--socket PATH] [--once]

For a choice, type an option's number (several, separated by commas, when more than one may
be chosen) or your own text; for yes/no, y or n (or your own text); for text, the text. An
empty line leaves a question unanswered; a single "!" dismisses the whole dialog. A
question withdrawn meanwhile (answered elsewhere, timed out, its agent gone) is announced.
"""

from __future__ import annotations

import argparse
import sys
from typing import Dict, Optional

import askbus
from askbus import answers


def show(req: askbus.Request) -> None:
    who = req.producer.client or "an unnamed agent"
    print(f"\n== {who} (pid {req.producer.pid}) asks, {req.remaining_ms // 1000} s left "
          f"[{req.correlation_id}]")


def read_answer(q: askbus.Question) -> Optional[str]:
    """One question's answer from stdin: None to dismiss, "" to leave it unanswered."""
    print(f"[{q['header']}] {q['question']}")
    kind = q["type"]
    if kind == "choice":
        for n, opt in enumerate(q.get("options", []), 1):
            print(f"  {n}. {opt['label']}" + (f" - {opt['description']}" if opt["description"]
                                              else ""))
        hint = "numbers, comma-separated, and/or your own text" if q.get("multiSelect") \
            else "a number or your own text"
    elif kind == "yesno":
        hint = "y/n or your own text"
    else:
        hint = q.get("placeholder") or "your answer"
    line = input(f"  ({hint}) > ")
    if line.strip() == "!":
        return None
    if kind == "text":
        return answers.text(line)
    if kind == "yesno":
        low = answers.js_trim(line).lower()
        if low in ("y", "yes", "n", "no"):
            return answers.yesno(low.startswith("y"))
        return answers.yesno(other=line) if answers.js_trim(line) else ""
    labels = [opt["label"] for opt in q.get("options", [])]
    if q.get("multiSelect"):
        picked, other = [], []
        for part in line.split(","):
            token = answers.js_trim(part)
            if token.isdigit() and 1 <= int(token) <= len(labels):
                picked.append(int(token) - 1)
            elif token:
                other.append(token)
        return answers.multi(q, picked, other=", ".join(other) or None)
    token = answers.js_trim(line)
    if token.isdigit() and 1 <= int(token) <= len(labels):
        return answers.choice(q, int(token) - 1)
    return answers.choice(q, other=line) if token else ""


def on_withdrawn(req: askbus.Request) -> None:
    # Called on askbus's I/O thread while the main thread may be waiting for input.
    print(f"\n-- {req.correlation_id} was withdrawn ({req.withdraw_reason})", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", help="the daemon's socket (default: as askbusd picks it)")
    parser.add_argument("--once", action="store_true", help="exit after one question")
    args = parser.parse_args()
    try:
        sub = askbus.subscribe(args.socket, client="askbus-example-ui/0.1.0",
                               on_withdrawn=on_withdrawn)
    except askbus.DaemonUnreachable as e:
        print(f"{e} (is askbusd running?)", file=sys.stderr)
        return 5
    print(f"waiting for questions on {sub.socket_path} (Ctrl-D to quit)", flush=True)
    with sub:
        for req in sub:
            show(req)
            given: Dict[str, str] = {}
            try:
                for index, question in enumerate(req.questions):
                    text = read_answer(question)
                    if text is None:
                        given = {}
                        break
                    given[str(index)] = text
                else:
                    text = ""
            except EOFError:
                return 0
            try:
                if text is None:
                    req.dismiss()
                    print("-> dismissed")
                else:
                    req.answer(answers.collect(given))
                    print("-> sent")
            except askbus.NotPending as e:
                print(f"-> too late: {e.withdraw_reason or e.message}")
            if args.once:
                return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
