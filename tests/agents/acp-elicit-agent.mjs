// A small ACP agent on the official SDK's agent side (`agent()`): each prompt asks the client
// one elicitation (the form or URL in $ACP_ELICITATION, JSON) and reports the response it got
// as an agent message (`ELICITED <json>`), then ends the turn.

import { Readable, Writable } from 'node:stream';
import { randomUUID } from 'node:crypto';

import * as acp from '@agentclientprotocol/sdk';

const elicitation = JSON.parse(process.env.ACP_ELICITATION);

const app = acp
  .agent({ name: 'askbus-elicit-agent' })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: {},
    agentInfo: { name: 'elicit-agent', version: '1.0.0' },
  }))
  .onRequest(acp.methods.agent.session.new, () => ({ sessionId: randomUUID() }))
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const response = await client.request(acp.methods.client.elicitation.create, {
      sessionId: params.sessionId,
      ...elicitation,
    });
    await client.notify(acp.methods.client.session.update, {
      sessionId: params.sessionId,
      update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: `ELICITED ${JSON.stringify(response)}` } },
    });
    return { stopReason: 'end_turn' };
  });

const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
const conn = app.connect(stream);
await conn.closed;
