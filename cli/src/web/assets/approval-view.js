// approval-view.js — an approval's body on the page, per `details.type` (the reference's
// SerializableConfirmationDetails): the command with its root commands marked for `exec`, a
// coloured diff for `edit`, server, tool and arguments for `mcp`, the prompt and its URLs for
// `info`, and the rest as plainly. Everything from the bus goes in as text; a URL becomes a
// link only if it is http(s), and then opens apart from this page (rel=noopener).

import { el, inline } from './dom.js';
import * as P from './approvals.js';

const str = (v) => (typeof v === 'string' ? v : '');
const list = (v) => (Array.isArray(v) ? v.filter((x) => typeof x === 'string') : []);

function json(v) {
  try {
    return JSON.stringify(v, null, 2) ?? '';
  } catch {
    return String(v);
  }
}

/** A labelled list of facts; rows whose value is empty are left out. */
function facts(rows) {
  const dl = el('dl', { class: 'facts' });
  for (const [k, v] of rows) {
    if (v === '' || v === null || v === undefined) continue;
    dl.append(el('div', { class: 'fact' }, [el('dt', { text: k }), el('dd', {}, v)]));
  }
  return dl.childElementCount ? dl : null;
}

function command(text, roots) {
  const pre = el('pre', { class: 'cmd', tabindex: '0', 'aria-label': 'Command' });
  for (const s of P.commandSpans(text, roots)) {
    pre.append(s.root ? el('mark', { class: 'root', text: s.text }) : s.text);
  }
  return pre;
}

function rootsLine(roots) {
  if (!roots.length) return null;
  return el('p', { class: 'roots' }, ['Runs ', ...roots.flatMap((r, i) => [i ? ', ' : '', el('code', { class: 'root', text: r })])]);
}

function warnings(items) {
  const shown = items.filter(([, v]) => v.length);
  if (!shown.length) return null;
  return el('ul', { class: 'warnings' }, shown.map(([what, v]) => el('li', {}, [`${what}: `, v.join(', ')])));
}

function exec(d, ctx) {
  const roots = list(d.rootCommands);
  const rootList = roots.length ? roots : str(d.rootCommand).split(',').map((s) => s.trim()).filter(Boolean);
  const cmds = list(d.commands);
  return [
    command(str(d.command), rootList),
    rootsLine(rootList),
    facts([['In', ctx.cwd ? el('code', { text: ctx.cwd }) : '']]),
    cmds.length > 1 ? el('details', { class: 'more' }, [
      el('summary', { text: `${cmds.length} commands` }),
      el('ol', { class: 'cmds' }, cmds.map((c) => el('li', {}, el('code', { text: c })))),
    ]) : null,
    warnings([['Untrusted flags', list(d.untrustedFlags)], ['Build files it changes', list(d.modifiedBuildFiles)]]),
  ];
}

function edit(d) {
  const lines = P.diffLines(str(d.fileDiff));
  const stat = d.diffStat && typeof d.diffStat === 'object' ? d.diffStat : null;
  const n = (k) => (stat && Number.isFinite(stat[k]) ? stat[k] : 0);
  const added = lines.filter((l) => l.kind === 'add').length;
  const removed = lines.filter((l) => l.kind === 'del').length;
  const pre = el('pre', { class: 'diff', tabindex: '0', 'aria-label': `Changes to ${str(d.fileName) || 'the file'}` });
  for (const l of lines) pre.append(el('span', { class: `d-${l.kind}`, text: l.text || ' ' }));
  if (!lines.length) pre.append(el('span', { class: 'd-meta', text: '(no changes in the diff)' }));
  const userEdits = n('user_added_lines') + n('user_removed_lines');
  return [
    el('p', { class: 'file' }, [
      el('strong', { class: 'file-name', text: str(d.fileName) || str(d.filePath) }),
      d.originalContent === null ? el('span', { class: 'chip new', text: 'new file' }) : null,
      d.isBuildFile === true ? el('span', { class: 'chip warn', text: 'build file' }) : null,
      el('span', { class: 'stat' }, [
        el('span', { class: 'plus', text: `+${stat ? n('model_added_lines') : added}` }), ' ',
        el('span', { class: 'minus', text: `−${stat ? n('model_removed_lines') : removed}` }),
      ]),
    ]),
    str(d.filePath) && str(d.filePath) !== str(d.fileName) ? el('p', { class: 'path' }, el('code', { text: d.filePath })) : null,
    userEdits ? el('p', { class: 'hint', text: `Includes your own edits: +${n('user_added_lines')} −${n('user_removed_lines')} lines` }) : null,
    pre,
  ];
}

function mcp(d, a) {
  const args = d.toolArgs !== undefined ? d.toolArgs : a.toolCall && a.toolCall.args;
  const tool = str(d.toolDisplayName) && str(d.toolDisplayName) !== str(d.toolName)
    ? `${d.toolDisplayName} (${str(d.toolName)})` : str(d.toolName) || P.toolName(a);
  return [
    facts([
      ['Server', str(d.serverName) || str(a.serverName)],
      ['Tool', tool],
      ['What it does', str(d.toolDescription) ? inline(d.toolDescription) : ''],
    ]),
    args !== undefined ? el('div', { class: 'args' }, [
      el('h3', { text: 'Arguments' }),
      el('pre', { class: 'json', tabindex: '0', text: json(args) }),
    ]) : null,
  ];
}

function info(d) {
  const urls = list(d.urls);
  return [
    el('p', { class: 'prompt' }, inline(str(d.prompt))),
    urls.length ? el('ul', { class: 'urls' }, urls.map((u) => {
      const href = P.safeUrl(u);
      return el('li', {}, href
        ? el('a', { href, target: '_blank', rel: 'noopener noreferrer', text: u })
        : [el('code', { text: u }), el('span', { class: 'hint', text: ' (not a web address: not a link)' })]);
    })) : null,
  ];
}

function sandbox(d, ctx) {
  const perms = d.additionalPermissions && typeof d.additionalPermissions === 'object' ? d.additionalPermissions : {};
  const fs = perms.fileSystem && typeof perms.fileSystem === 'object' ? perms.fileSystem : {};
  const paths = (v) => {
    const l = list(v);
    return l.length ? el('span', {}, l.flatMap((p, i) => [i ? ', ' : '', el('code', { text: p })])) : '';
  };
  return [
    command(str(d.command), str(d.rootCommand).split(',').map((s) => s.trim()).filter(Boolean)),
    facts([
      ['In', ctx.cwd ? el('code', { text: ctx.cwd }) : ''],
      ['Read', paths(fs.read)],
      ['Write', paths(fs.write)],
      ['Network', perms.network === true ? 'yes' : ''],
    ]),
  ];
}

function askUser(d) {
  const qs = Array.isArray(d.questions) ? d.questions : [];
  return [el('ol', { class: 'asked' }, qs.map((q) => el('li', {}, [
    q && q.header ? el('span', { class: 'chip', text: String(q.header) }) : null, ' ',
    inline(q && typeof q.question === 'string' ? q.question : ''),
  ])))];
}

function plain(a) {
  const args = a.toolCall && a.toolCall.args;
  return [
    facts([['Tool', P.toolName(a)], ['Server', str(a.serverName)]]),
    args !== undefined ? el('pre', { class: 'json', tabindex: '0', text: json(args) }) : null,
  ];
}

/** The body of approval `a`; `ctx` is its context (for the working directory). */
export function body(a, ctx) {
  const d = a.details && typeof a.details === 'object' ? a.details : null;
  let parts;
  switch (d && d.type) {
    case 'exec': parts = exec(d, ctx); break;
    case 'edit': parts = edit(d); break;
    case 'mcp': parts = mcp(d, a); break;
    case 'info': parts = info(d); break;
    case 'sandbox_expansion': parts = sandbox(d, ctx); break;
    case 'ask_user': parts = askUser(d); break;
    case 'exit_plan_mode': parts = [facts([['Plan', el('code', { text: str(d.planPath) })]])]; break;
    default: parts = plain(a);
  }
  const kind = d && P.KINDS[d.type];
  const ann = a.toolAnnotations && typeof a.toolAnnotations === 'object' ? a.toolAnnotations : {};
  return el('div', { tabindex: '-1', class: `approval-body kind-${d && typeof d.type === 'string' ? d.type.replace(/[^a-z_]/g, '') : 'none'}` }, [
    el('p', { class: 'kind' }, [
      el('span', { class: 'chip', text: kind || 'Tool call' }),
      el('span', { class: 'toolname' }, [el('code', { text: P.toolName(a) })]),
      str(a.serverName) ? el('span', { class: 'hint', text: `on ${a.serverName}` }) : null,
      str(a.subagent) ? el('span', { class: 'hint', text: `by subagent ${a.subagent}` }) : null,
      ann.destructiveHint === true ? el('span', { class: 'chip warn', text: 'destructive' }) : null,
      ann.readOnlyHint === true ? el('span', { class: 'chip', text: 'read-only' }) : null,
    ]),
    el('h2', { class: 'qtext', id: 'approval-title', text: P.summary(a) }),
    ...parts,
    d && str(d.systemMessage) ? el('p', { class: 'system' }, inline(d.systemMessage)) : null,
  ]);
}
