// app.js — the page of `askbus web`: one live UI of the daemon per tab. The modules by role:
// state.js (what the page knows, and its notices), bus.js (the WebSocket and the frames from
// the bus), queue.js (the list of pending requests), dialog.js (answering a question or
// deciding an approval), settings.js (filter, notifications, theme, sign-out), history.js
// (the History view). This file starts them.

import * as H from './history.js';
import { connect, readHash } from './bus.js';
import { onKey } from './dialog.js';
import { tick } from './queue.js';
import { setupFilter, setupNotify, setupSignOut, setupTheme } from './settings.js';

setupTheme();
setupSignOut();
setupNotify();
setupFilter();
H.setupHistory();
document.addEventListener('keydown', onKey);
window.addEventListener('hashchange', readHash);
setInterval(tick, 1000);
readHash();
connect();
