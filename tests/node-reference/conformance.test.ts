/**
 * Side by side: the reference AskUserTool (from @google/gemini-cli-core 0.61.0, run here in
 * process) and the daemon (through this client) on every shared case. For the 1,035
 * validation cases: the reference's build(params) accepts ⇔ the daemon accepts; the normalized
 * questions are equal; the error messages are equal. For the 120 result cases: the daemon's
 * `result` equals what the reference invocation's execute() returns after the same answers
 * went through the confirmation's onConfirm. One daemon, every request pipelined.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { AskUserTool } from "@google/gemini-cli-core/dist/src/tools/ask-user.js";

import { InvalidRequest, Producer, subscribe, type AskResponse, type UiRequest } from "../../clients/node/src/index.js";
import { closeLater, Raw, REPO_ROOT, startDaemon, within, type Daemon } from "../../clients/node/test/helpers.js";

interface RefCase {
  params: Record<string, unknown>;
  ok: boolean;
  normalized?: unknown[];
  error?: string;
}
interface ResultCase {
  params: { questions: unknown[] };
  answers: Record<string, string>;
  answerOrder: string[];
  cancelled: boolean;
  result: unknown;
}

const load = <T>(name: string): T => JSON.parse(readFileSync(join(REPO_ROOT, "clients/rust/tests/data", name), "utf8")) as T;

/** A bus the reference tool can hold; ask_user never publishes on it in 0.61.0. */
const stubBus = { publish() {}, subscribe() {}, unsubscribe() {} };
// Typed loosely: the cases feed it malformed params on purpose.
const tool: any = new AskUserTool(stubBus as any);

type RefOutcome = { ok: true; normalized: unknown } | { ok: false; error: string };

function reference(params: unknown): RefOutcome {
  try {
    const inv = tool.build(params);
    return { ok: true, normalized: JSON.parse(JSON.stringify(inv.params.questions)) };
  } catch (e) {
    return { ok: false, error: (e as Error).message };
  }
}

async function referenceResult(c: ResultCase): Promise<unknown> {
  const inv = tool.build(c.params);
  const details = await inv.shouldConfirmExecute(new AbortController().signal);
  if (c.cancelled) await details.onConfirm("cancel");
  else await details.onConfirm("proceed_once", { answers: c.answers });
  return JSON.parse(JSON.stringify(await inv.execute({ abortSignal: new AbortController().signal })));
}

describe("conformance with the reference AskUserTool", () => {
  let d: Daemon;
  before(async () => {
    d = await startDaemon({ args: ["--max-pending-per-connection", "5000"] });
  });
  after(async () => {
    assert.equal(await d.stop(), 0);
    d.cleanup();
  });

  test("1,035 validation cases: accept ⇔ accept, normalized equal, message equal", async () => {
    const cases = load<RefCase[]>("ask_user_reference_cases.json");
    assert.equal(cases.length, 1035);
    const sub = closeLater(subscribe({ socket: d.socket }));
    await sub.ready;
    const seen = new Map<string, UiRequest>();
    const wake: { fn: (() => void) | null } = { fn: null };
    const uiLoop = (async () => {
      for await (const req of sub) {
        seen.set(req.correlationId, req);
        wake.fn?.();
      }
    })();
    const p = closeLater(new Producer({ socket: d.socket, client: "conformance" }));
    const asks = cases.map((c, i) => {
      // Through the public API: `questions` as given (absent in some cases, so the daemon
      // reports the missing property as the reference does); stray top-level keys, which the
      // reference ignores, are not the client's to forward.
      return p.start(c.params.questions, { correlationId: `ref-${i}` });
    });
    // Observed from the start: the rejections arrive long before they are examined.
    const outcomes = asks.map((a) =>
      a.response.then(
        (value) => ({ status: "fulfilled" as const, value }),
        (reason: unknown) => ({ status: "rejected" as const, reason }),
      ),
    );
    const expectAccepted = cases.map((c) => reference(c.params)).filter((r) => r.ok).length;
    // Accepted ones reach the UI; then withdrawing them ends their asks.
    while (seen.size < expectAccepted) {
      await within(new Promise<void>((r) => (wake.fn = r)), 10_000, `accepted requests (${seen.size} of ${expectAccepted})`);
    }
    for (const id of seen.keys()) p.cancel(id);
    const settled = await within(
      Promise.all(outcomes),
      20_000,
      "every ask's outcome",
    );

    let acceptAgree = 0;
    let normalizedEqual = 0;
    let messageEqual = 0;
    let recordedAgree = 0;
    const problems: string[] = [];
    cases.forEach((c, i) => {
      const ref = reference(c.params);
      const recorded = c.ok ? { ok: true, normalized: c.normalized } : { ok: false, error: c.error };
      try {
        assert.deepStrictEqual(ref, recorded);
        recordedAgree++;
      } catch {
        problems.push(`case ${i}: the live reference differs from the recorded outcome`);
      }
      const id = `ref-${i}`;
      const s = settled[i]!;
      const daemonAccepted = seen.has(id);
      if (ref.ok === daemonAccepted) acceptAgree++;
      else problems.push(`case ${i}: reference ${ref.ok ? "accepts" : "rejects"}, daemon ${daemonAccepted ? "accepts" : "rejects"}`);
      if (ref.ok && daemonAccepted) {
        try {
          assert.deepStrictEqual(seen.get(id)!.questions, ref.normalized);
          normalizedEqual++;
        } catch {
          problems.push(`case ${i}: normalized questions differ`);
        }
        if (s.status !== "fulfilled" || (s.value as AskResponse).reason !== "withdrawn") {
          problems.push(`case ${i}: accepted ask did not end withdrawn`);
        }
      }
      if (!ref.ok) {
        const err = s.status === "rejected" ? (s.reason as unknown) : undefined;
        if (err instanceof InvalidRequest && err.message === ref.error && err.correlationId === id) messageEqual++;
        else problems.push(`case ${i}: reference says ${JSON.stringify(ref.error)}, daemon ${String(err ?? "accepted")}`);
      }
    });
    const accepted = cases.filter((c) => c.ok).length;
    console.log(
      `validation: ${acceptAgree}/${cases.length} accept/reject agree; ` +
        `${normalizedEqual}/${accepted} normalized equal; ${messageEqual}/${cases.length - accepted} messages equal; ` +
        `live reference = recorded file: ${recordedAgree}/${cases.length}`,
    );
    assert.deepEqual(problems.slice(0, 20), []);
    assert.equal(acceptAgree, cases.length);
    p.close();
    sub.close();
    await uiLoop;
  });

  test("120 result cases: the daemon's result equals execute() after onConfirm", async () => {
    const cases = load<ResultCase[]>("ask_user_result_cases.json");
    assert.equal(cases.length, 120);
    // A raw UI: answers go out with their keys in answerOrder, which a JS object cannot keep.
    const ui = await Raw.open(d.socket);
    ui.send({ type: "subscribe", client: "conformance-ui" });
    await ui.nextOf("subscribed");
    const p = closeLater(new Producer({ socket: d.socket }));
    const asks = cases.map((c, i) => p.ask(c.params.questions, { correlationId: `res-${i}` }));
    for (let n = 0; n < cases.length; n++) {
      const req = await ui.nextOf("ask-user-request");
      assert.match(req.correlationId, /^res-\d+$/);
      const c = cases[Number(req.correlationId.slice(4))]!;
      if (c.cancelled) {
        ui.send({ type: "ask-user-response", correlationId: req.correlationId, answers: {}, cancelled: true });
      } else {
        const body = c.answerOrder.map((k) => `${JSON.stringify(k)}:${JSON.stringify(c.answers[k])}`).join(",");
        ui.sendRaw(`{"type":"ask-user-response","correlationId":${JSON.stringify(req.correlationId)},"answers":{${body}}}`);
      }
    }
    const responses = await within(Promise.all(asks), 10_000, "120 answers");
    let equal = 0;
    let recordedEqual = 0;
    const problems: string[] = [];
    for (const [i, c] of cases.entries()) {
      const ref = await referenceResult(c);
      const got = responses[i]!;
      try {
        assert.deepStrictEqual(got.result, ref);
        equal++;
      } catch {
        problems.push(`case ${i}: daemon ${JSON.stringify(got.result)}\n  reference ${JSON.stringify(ref)}`);
      }
      try {
        assert.deepStrictEqual(ref, c.result);
        recordedEqual++;
      } catch {
        problems.push(`case ${i}: the live reference differs from the recorded result`);
      }
      assert.equal(got.reason, c.cancelled ? "dismissed" : "answered");
      if (!c.cancelled) assert.deepStrictEqual(got.answers, c.answers);
    }
    console.log(`results: ${equal}/${cases.length} daemon result = reference execute(); live reference = recorded file: ${recordedEqual}/${cases.length}`);
    assert.deepEqual(problems.slice(0, 10), []);
    p.close();
    ui.close();
  });
});
