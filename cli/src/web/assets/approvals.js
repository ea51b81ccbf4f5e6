// approvals.js — what the page makes of a `tool-confirmation-request` (proto/PROTOCOL.md
// "Approval frames"): the buttons it may offer, the frames a decision sends, and the pieces
// its details are drawn from (the command's root commands, a diff's lines, which URLs may be
// links). Pure functions: `node --test` checks them without a browser.

/** The reference's outcomes in its order, with what a button says. */
export const OUTCOMES = Object.freeze([
  ['proceed_once', 'Allow once'],
  ['proceed_always', 'Allow always'],
  ['proceed_always_and_save', 'Allow always and save'],
  ['proceed_always_server', 'Allow every tool of this server'],
  ['proceed_always_tool', 'Allow this tool always'],
  ['modify_with_editor', 'Modify'],
  ['cancel', 'Deny'],
]);
const LABELS = Object.fromEntries(OUTCOMES);

/** Longest message a UI may send with a decision (characters). */
export const MAX_MESSAGE = 4096;

/** What each detail kind asks, as a heading chip. */
export const KINDS = Object.freeze({
  exec: 'Run a command',
  edit: 'Edit a file',
  mcp: 'MCP tool',
  info: 'Fetch',
  sandbox_expansion: 'Sandbox permissions',
  ask_user: 'Ask the user',
  exit_plan_mode: 'Leave plan mode',
});

export function label(outcome) {
  return LABELS[outcome] || outcome;
}

/**
 * The buttons, in screen order: the approving outcomes the request offers (never one it does
 * not: the daemon would refuse it), then Deny. `modify_with_editor` needs an editor and the
 * edited text, which the page does not have, so it is not offered.
 */
export function buttons(outcomes, always) {
  const offered = new Set(Array.isArray(outcomes) ? outcomes : []);
  // askbus's own "Allow always" (its rule) where the agent offers none: `askbusAlways`.
  for (const o of alwaysOffers(always)) offered.add(o.outcome);
  // Every approval offers these two, whatever the list says (the daemon adds them).
  offered.add('proceed_once');
  offered.add('cancel');
  const allow = OUTCOMES.map(([o]) => o).filter((o) => o !== 'cancel' && o !== 'modify_with_editor' && offered.has(o));
  return allow.concat(['cancel']);
}

/** The "always" buttons askbus web offers for an approval (its `askbusAlways`: each with
 * `outcome`, `rule` it writes in the request's project, `everyProject` when widened), kept
 * to well-formed entries. */
export function alwaysOffers(always) {
  if (!Array.isArray(always)) return [];
  return always.filter((o) => o && typeof o.outcome === 'string' && OUTCOMES.some(([k]) => k === o.outcome));
}

/** The rule the "always" button `outcome` writes (widened to every project or not): the
 * text, `null` when it writes none, `undefined` when it is no "always" button. */
export function alwaysRule(always, outcome, everyProject) {
  const o = alwaysOffers(always).find((x) => x.outcome === outcome);
  if (!o) return undefined;
  const wide = everyProject && typeof o.everyProject === 'string' ? o.everyProject : null;
  return wide || (typeof o.rule === 'string' ? o.rule : null);
}

/** The `tool-confirmation-response` for `outcome`; `message` goes with a denial only (the
 * text the agent is told why), trimmed, and left out when empty; `anyProject` widens an
 * "always" rule to every project (askbus web's own word, taken out before the daemon). */
export function decisionFrame(correlationId, outcome, message, anyProject) {
  const f = { type: 'tool-confirmation-response', correlationId, confirmed: outcome !== 'cancel', outcome };
  const m = typeof message === 'string' ? message.trim() : '';
  if (outcome === 'cancel' && m) f.message = [...m].slice(0, MAX_MESSAGE).join('');
  if (anyProject === true && outcome !== 'cancel' && outcome !== 'proceed_once') f.anyProject = true;
  return f;
}

/** Closing the prompt without deciding (never an approval). */
export function dismissFrame(correlationId) {
  return { type: 'tool-confirmation-response', correlationId, dismissed: true };
}

/** The tool's name (`toolCall.name`). */
export function toolName(a) {
  const n = a && a.toolCall && a.toolCall.name;
  return typeof n === 'string' && n ? n : 'a tool';
}

/** One line naming the approval: its details' title, else the tool. */
export function summary(a) {
  const t = a && a.details && a.details.title;
  return typeof t === 'string' && t.trim() ? t : `Allow ${toolName(a)}?`;
}

const WORD = /(?:[^\s;&|()`'"\\<>]|\\.|'[^']*'|"(?:[^"\\]|\\.)*")+/y;
const SEPARATOR = /(?:&&|\|\||\|&|;;|[;&|()\n`]|\$\()/y;
const SPACE = /[ \t\r]+/y;
const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/;

/**
 * The command as spans `{text, root}`: `root` marks each word in a command position (the
 * start, or after `;`, `&&`, `||`, `|`, `(`, `$(`, a backquote or a new line; past `VAR=value`
 * prefixes) whose name is one of `roots`, the root commands the agent's parser found. Quoted
 * text is one word, so a separator inside quotes starts nothing.
 */
export function commandSpans(command, roots) {
  const s = String(command ?? '');
  const names = new Set((Array.isArray(roots) ? roots : []).filter((r) => typeof r === 'string' && r));
  const spans = [];
  const push = (text, root) => {
    const lastSpan = spans[spans.length - 1];
    if (!root && lastSpan && !lastSpan.root) lastSpan.text += text;
    else spans.push({ text, root });
  };
  let i = 0;
  let atCommand = true;
  while (i < s.length) {
    let m;
    for (const re of [SPACE, SEPARATOR, WORD]) {
      re.lastIndex = i;
      m = re.exec(s);
      if (m) {
        const t = m[0];
        if (re === SEPARATOR) atCommand = true;
        if (re === WORD) {
          if (atCommand && !ASSIGNMENT.test(t)) {
            const base = t.slice(t.lastIndexOf('/') + 1);
            push(t, names.has(t) || names.has(base));
            atCommand = false;
          } else {
            push(t, false);
          }
        } else {
          push(t, false);
        }
        i += t.length;
        break;
      }
    }
    if (!m) {
      // A character none of the patterns take (an unmatched quote, `<`, `>`): plain text.
      push(s[i], false);
      i += 1;
    }
  }
  return spans;
}

/** A unified diff's lines, each `{text, kind}`: `add`, `del`, `hunk` (`@@`), `meta` (file
 * headers, "\ No newline"), or `ctx`. */
export function diffLines(diff) {
  const lines = String(diff ?? '').split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  return lines.map((text) => {
    let kind = 'ctx';
    if (text.startsWith('+++') || text.startsWith('---') || text.startsWith('\\')
      || text.startsWith('diff ') || text.startsWith('index ') || text.startsWith('Index: ')
      || /^=+$/.test(text)) kind = 'meta';
    else if (text.startsWith('@@')) kind = 'hunk';
    else if (text.startsWith('+')) kind = 'add';
    else if (text.startsWith('-')) kind = 'del';
    return { text, kind };
  });
}

/** The address a URL may be a link to: http and https only (never `javascript:`, `data:`,
 * `file:`…), or null. */
export function safeUrl(u) {
  if (typeof u !== 'string') return null;
  try {
    const url = new URL(u);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : null;
  } catch {
    return null;
  }
}
