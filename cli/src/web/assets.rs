//! The page's files, embedded in the binary at build time (no build step, nothing to install
//! beside `askbus`), and the headers every response carries.

use axum::http::{header, HeaderMap, HeaderValue};

pub struct Asset {
    /// The path under which the page asks for it.
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

pub const INDEX: Asset = Asset {
    path: "/",
    content_type: "text/html; charset=utf-8",
    body: include_bytes!("assets/index.html"),
};

/// Everything under `/assets/`.
pub const FILES: &[Asset] = &[
    Asset {
        path: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("assets/app.js"),
    },
    Asset {
        path: "state.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("assets/state.js"),
    },
    Asset {
        path: "bus.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("assets/bus.js"),
    },
    Asset {
        path: "queue.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("assets/queue.js"),
    },
    Asset {
        path: "dialog.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("assets/dialog.js"),
    },
    Asset {
        path: "settings.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("assets/settings.js"),
    },
    Asset {
        path: "answers.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("assets/answers.js"),
    },
    Asset {
        path: "dom.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("assets/dom.js"),
    },
    Asset {
        path: "filter.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("assets/filter.js"),
    },
    Asset {
        path: "approvals.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("assets/approvals.js"),
    },
    Asset {
        path: "approval-view.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("assets/approval-view.js"),
    },
    Asset {
        path: "history.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("assets/history.js"),
    },
    Asset {
        path: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("assets/style.css"),
    },
    Asset {
        path: "icon.svg",
        content_type: "image/svg+xml",
        body: include_bytes!("assets/icon.svg"),
    },
];

pub fn find(name: &str) -> Option<&'static Asset> {
    FILES.iter().find(|a| a.path == name)
}

/// The page runs only its own scripts and styles, talks only to its own server, and cannot be
/// framed (clickjacking) or leak its address to other sites.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The signed-link pages: no script at all, and one form that posts to the page's own URL.
pub const CSP_FORM: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
                            base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Added to every response, refusals included.
pub fn security_headers(h: &mut HeaderMap) {
    let set = |h: &mut HeaderMap, name: header::HeaderName, value: &'static str| {
        h.insert(name, HeaderValue::from_static(value));
    };
    set(h, header::CONTENT_SECURITY_POLICY, CSP);
    set(h, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(h, header::X_FRAME_OPTIONS, "DENY");
    set(h, header::REFERRER_POLICY, "no-referrer");
    // Questions are private and live: never kept by a browser or proxy cache.
    set(h, header::CACHE_CONTROL, "no-store");
    set(
        h,
        header::HeaderName::from_static("cross-origin-opener-policy"),
        "same-origin",
    );
    set(
        h,
        header::HeaderName::from_static("cross-origin-resource-policy"),
        "same-origin",
    );
}
