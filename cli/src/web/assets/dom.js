// dom.js — the two ways the page builds its elements. Bus text only ever enters the page as
// text nodes and attribute values (never as HTML), so a question or a tool call cannot inject
// markup or script.

/** An element with attributes (`text` sets its text, `on…` adds a listener) and children. */
export function el(tag, attrs = {}, children = []) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false || v === null || v === undefined) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of [].concat(children)) {
    if (c !== null && c !== undefined) e.append(c);
  }
  return e;
}

/** Text with `code` and **bold** spans, as the reference renders them; never HTML. */
export function inline(text) {
  const s = String(text);
  const frag = document.createDocumentFragment();
  const re = /(`[^`\n]+`|\*\*[^*\n]+\*\*)/g;
  let last = 0;
  for (const m of s.matchAll(re)) {
    if (m.index > last) frag.append(s.slice(last, m.index));
    const t = m[0];
    frag.append(t.startsWith('`') ? el('code', { text: t.slice(1, -1) }) : el('strong', { text: t.slice(2, -2) }));
    last = m.index + t.length;
  }
  if (last < s.length) frag.append(s.slice(last));
  return frag;
}
