#!/usr/bin/env python3
"""Asks whoever sits at an askbus UI two questions, as an agent's ask_user call would, and
prints what the model would be handed.

    python3 ask.py [--socket PATH] [--timeout-ms N] [--no-ui wait|reject]

Exit status: 0 answered, 1 dismissed, 2 timed out, 3 no UI, 4 refused, 5 no daemon,
6 withdrawn or shut down, 130 interrupted (the question is withdrawn from the UIs).
"""

from __future__ import annotations

import argparse
import sys
from typing import List

import askbus

QUESTIONS: List[askbus.Question] = [
    {
        "question": "Which database should the new service use?",
        "header": "Database",
        "type": "choice",
        "options": [
            {"label": "SQLite", "description": "A single file; nothing to run"},
            {"label": "PostgreSQL", "description": "A server; best for many writers"},
        ],
    },
    {"question": "Add a migration for the existing users table?", "header": "Migrate",
     "type": "yesno"},
]

EXIT = {"answered": 0, "dismissed": 1, "timeout": 2, "no-ui": 3, "withdrawn": 6, "shutdown": 6}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", help="the daemon's socket (default: as askbusd picks it)")
    parser.add_argument("--timeout-ms", type=int, help="how long to wait for an answer")
    parser.add_argument("--no-ui", choices=["wait", "reject"], help="when no UI is connected")
    args = parser.parse_args()
    try:
        response = askbus.ask(QUESTIONS, socket=args.socket, timeout_ms=args.timeout_ms,
                              no_ui=args.no_ui, client="askbus-example-ask/0.1.0")
    except KeyboardInterrupt:
        print("interrupted: the question was withdrawn", file=sys.stderr)
        return 130
    except askbus.DaemonUnreachable as e:
        print(f"{e} (is askbusd running?)", file=sys.stderr)
        return 5
    except askbus.DaemonError as e:
        print(f"refused ({e.code}): {e.message}", file=sys.stderr)
        return 4
    if response.answered:
        for index, answer in sorted(response.answers.items()):
            print(f"{QUESTIONS[int(index)]['header']}: {answer}")
    else:
        print(response.result.llm_content, file=sys.stderr)
    return EXIT[response.reason]


if __name__ == "__main__":
    sys.exit(main())
