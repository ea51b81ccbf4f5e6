// filter.js — which requests a page shows, by their context (project, agent): the same rules
// as the daemon's `subscribe` filter (proto/PROTOCOL.md "Filter"), which is what really
// applies them (the page's WebSocket subscribes with it), and the page address that carries
// them (`?project=P&agent=A`). Pure functions: `node --test` checks them without a browser.

/** The filter keys the page offers, with the daemon's length limits (characters). */
export const KEYS = Object.freeze({ project: 128, agent: 256 });

/** Why `value` cannot be a filter value for `key`, or null: non-empty, at most the key's
 * length in characters, one line without control characters (as the daemon checks it). */
export function problem(key, value) {
  if (typeof value !== 'string' || value === '') return `the ${key} must not be empty`;
  if ([...value].length > KEYS[key]) return `the ${key} must be at most ${KEYS[key]} characters`;
  // C0, DEL and C1: what Rust's char::is_control refuses.
  if (/[\u0000-\u001f\u007f-\u009f]/.test(value)) return `the ${key} must be one line without control characters`;
  return null;
}

/** {filter, problems} from a query string: the valid keys kept, each refusal said. */
export function fromSearch(search) {
  const params = new URLSearchParams(search);
  const filter = {};
  const problems = [];
  for (const key of Object.keys(KEYS)) {
    const v = params.get(key);
    if (v === null || v === '') continue;
    const p = problem(key, v);
    if (p) problems.push(p);
    else filter[key] = v;
  }
  return { filter, problems };
}

/** `search` with the filter's keys set, other parameters kept but the access token: an
 * address made to be shared must not carry access to the page. */
export function toSearch(search, filter) {
  const params = new URLSearchParams(search);
  params.delete('token');
  for (const key of Object.keys(KEYS)) {
    if (filter[key]) params.set(key, filter[key]);
    else params.delete(key);
  }
  const s = params.toString();
  return s ? `?${s}` : '';
}

/** Whether the filter has any key. */
export function isEmpty(filter) {
  return !Object.keys(KEYS).some((k) => filter[k]);
}

/** Whether a request with `context` is shown: every key given matches; `agent` matches the
 * whole `name/version` or its name part. */
export function matches(filter, context) {
  const c = context || {};
  if (filter.project && c.project !== filter.project) return false;
  if (filter.agent) {
    const a = c.agent;
    if (typeof a !== 'string') return false;
    if (a !== filter.agent && !a.startsWith(`${filter.agent}/`)) return false;
  }
  return true;
}

/** One line saying what the filter shows. */
export function describe(filter) {
  const parts = [];
  if (filter.project) parts.push(`project ${filter.project}`);
  if (filter.agent) parts.push(`agent ${filter.agent}`);
  return parts.length ? parts.join(', ') : 'all projects and agents';
}
