#!/usr/bin/env node
// Connects a Gemini CLI core MessageBus to askbusd: ask_user questions published on the bus are
// answered by whichever askbus UI answers first (run `node examples/ui.mjs` elsewhere).
// Needs @google/gemini-cli-core beside askbus (your agent already has it; tests/node-reference
// runs this example that way).
import { MessageBus } from "@google/gemini-cli-core";
import { bridgeMessageBus } from "askbus";

// In an agent this is the bus Gemini CLI core already uses (config.getMessageBus()).
const bus = new MessageBus(/* policyEngine: only consulted for tool confirmations */ {});
// Every question says who asks about what (its `context`): the agent (gemini-cli-core/<version>),
// and with `config` (your agent's Config: config.getSessionId(), getProjectRoot()) its session
// and project; without one, this directory and its name. `context: {title: "..."}` adds a line.
const bridge = bridgeMessageBus(bus, {
  client: "gemini-bridge-example/1",
  context: { title: "Asking from the bridge example" },
  onError: (e) => console.error(e.message),
});

// What code on the bus does unchanged; the bridge answers it through the daemon. The bus waits
// as long as the UIs count down (askbusd's default timeout, 10 minutes), so the person is
// never shown time the bus has already given up on.
const response = await bus.request(
  { type: "ask-user-request", questions: [{ question: "Ship it today?", header: "Release", type: "yesno" }] },
  "ask-user-response",
  600_000,
);
console.log(response.cancelled ? "no answer" : `answer: ${response.answers["0"]}`);
bridge.detach();
