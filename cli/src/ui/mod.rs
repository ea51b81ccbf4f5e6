//! `askbus ui`: the terminal frontend. Subscribes as a UI, shows the pending questions and
//! approvals, answers questions with the reference dialog's encoding and decides approvals;
//! survives daemon restarts.
//!
//! - [`encode`]: the answer strings (pure, unit-tested against the reference's rules);
//! - [`input`]: the line editor used by text fields;
//! - [`question`]: a question as the dialog reads it, and a choice's rows;
//! - [`dialog`]: one question's dialog state and keys;
//! - [`approval`]: one approval's buttons, reason and keys;
//! - [`entry`]: a pending request, the connection state, the view, notices, what is sent;
//! - [`app`]: every request and the transitions bus events and keys make;
//! - [`render`]: drawing with ratatui (the frame, the list, a question's dialog);
//! - [`scroll`]: what part of a tall dialog is shown, and the keys that scroll it;
//! - [`history`]: the recent history (`h`), fetched here with the daemon's `history` frame;
//! - this file: the terminal and the loop joining keys, the subscription (the client crate's
//!   [`UiSubscription`], which reconnects with backoff) and the clock.

mod app;
mod approval;
mod dialog;
pub(crate) mod encode;
mod entry;
mod history;
mod input;
pub(crate) mod question;
mod render;
mod scroll;

use std::io::{BufWriter, IsTerminal, Stdout, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use crossterm::event::{
    DisableBracketedPaste, EnableBracketedPaste, Event, EventStream, KeyEventKind,
};
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use futures_util::StreamExt;
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use tokio::signal::unix::{signal, SignalKind};

use app::{Action, App};
use askbus::client::{ClientError, UiSubscription, UiUpdate, Update};
use askbus::protocol::{Decision, SubscribeFilter};

/// The name this UI announces to the daemon.
const CLIENT: &str = concat!("askbus-ui/", env!("CARGO_PKG_VERSION"));

pub async fn run(socket: &Path, filter: SubscribeFilter) -> Result<ExitCode> {
    if !std::io::stdout().is_terminal() {
        eprintln!(
            "askbus ui: standard output is not a terminal, and the dialog needs one.\n\
             For scripts, use `askbus pending` to list questions and `askbus answer` to answer."
        );
        return Ok(ExitCode::from(crate::fail::exit::NOT_A_TERMINAL));
    }
    // Keys come from the terminal itself (crossterm opens /dev/tty when stdin is not one), so
    // `askbus ask … | askbus ui` works; what arrives on the pipe (the asking side's answer)
    // is kept and printed when the UI quits, instead of being swallowed.
    let piped = (!std::io::stdin().is_terminal()).then(PipedInput::start);
    let mut term = TerminalGuard::enter().context("cannot set up the terminal")?;
    let result = event_loop(&mut term.terminal, socket, filter, piped.as_ref()).await;
    drop(term);
    if let Some(p) = piped {
        let text = p.take();
        if !text.is_empty() {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(&text).and_then(|()| out.flush());
        }
    }
    result.map(|()| ExitCode::SUCCESS)
}

/// Standard input when it is a pipe: read to its end on a thread of its own, kept whole.
struct PipedInput {
    text: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    /// Told when the pipe has ended, with how many bytes came.
    ended: tokio::sync::watch::Receiver<Option<usize>>,
}

impl PipedInput {
    fn start() -> PipedInput {
        let text = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, ended) = tokio::sync::watch::channel(None);
        let t = text.clone();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut stdin = std::io::stdin().lock();
            let mut buf = [0u8; 8192];
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => t.lock().expect("pipe buffer").extend_from_slice(&buf[..n]),
                }
            }
            let n = t.lock().expect("pipe buffer").len();
            let _ = tx.send(Some(n));
        });
        PipedInput { text, ended }
    }

    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.text.lock().expect("pipe buffer"))
    }
}

async fn event_loop(
    terminal: &mut Terminal<CrosstermBackend<BufWriter<Stdout>>>,
    socket: &Path,
    filter: SubscribeFilter,
    piped: Option<&PipedInput>,
) -> Result<()> {
    let mut pipe_ended = piped.map(|p| p.ended.clone());
    let label = crate::context::describe_filter(&filter);
    // A person watches this screen: refusals are shown and retried too, as they may fix them.
    let sub = UiSubscription::new(socket, Some(CLIENT))
        .via("tui")
        .filtered(filter)
        .persistent();
    // The subscription's next update, polled to its end across the loop's turns (a key or
    // the clock never cuts a connection attempt short).
    let mut next = Box::pin(next_update(sub));
    let mut keys = EventStream::new();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut term_signal = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut int = signal(SignalKind::interrupt())?;
    let socket_text = socket.display().to_string();
    let mut app = App::new();
    app.filter = label;
    let mut answerer = None;
    loop {
        terminal.draw(|f| render::draw(f, &app, Instant::now(), &socket_text))?;
        tokio::select! {
            (update, sub) = &mut next => {
                next.set(next_update(sub));
                let now = Instant::now();
                match update {
                    Ok(Update::Connected((pending, a))) => {
                        answerer = Some(a);
                        app.on_connected(pending);
                    }
                    Ok(Update::Event(e)) => app.on_event(e, now),
                    Ok(Update::Down { error, retry_in }) => {
                        answerer = None;
                        app.on_down(error.to_string(), retry_in, now);
                    }
                    // A persistent subscription reports refusals as `Down`; this is never
                    // reached, and would mean the next attempt comes at once.
                    Err(e) => {
                        answerer = None;
                        app.on_down(e.to_string(), Duration::ZERO, now);
                    }
                }
            }
            event = keys.next() => {
                let action = match event {
                    None => break,
                    Some(Err(e)) => return Err(e).context("cannot read the terminal"),
                    Some(Ok(Event::Key(k))) if k.kind != KeyEventKind::Release => app.on_key(k),
                    Some(Ok(Event::Paste(text))) => {
                        app.on_paste(&text);
                        None
                    }
                    Some(Ok(_)) => None,
                };
                let Some(action) = action else { continue };
                let sent = match (&action, &answerer) {
                    (Action::Quit, _) => break,
                    (Action::LoadHistory, _) => {
                        app.on_history(recent_history(socket).await);
                        Ok(())
                    }
                    (Action::Answer { id, answers }, Some(a)) => a.answer(id, answers).await.map_err(|e| (id, e)),
                    (Action::Dismiss { id }, Some(a)) => a.dismiss(id).await.map_err(|e| (id, e)),
                    (Action::Decide { id, outcome, message, rule }, Some(a)) => {
                        // askbus's "always" rule first, so the daemon decides the next
                        // identical call by it; a rule that cannot be written sends nothing.
                        match rule.as_ref().map(crate::always::write).transpose() {
                            Err(e) => {
                                app.on_send_failed(id, &format!("the rule was not written: {e}"));
                                continue;
                            }
                            Ok(Some(_)) => {
                                app.on_rule_written(id, rule.as_ref().map(|r| r.summary.as_str()))
                            }
                            Ok(None) => {}
                        }
                        let decision = Decision::Decided {
                            outcome: *outcome,
                            message: message.clone(),
                            payload: None,
                        };
                        a.decide(id, &decision).await.map_err(|e| (id, e))
                    }
                    (Action::DismissApproval { id }, Some(a)) => {
                        a.decide(id, &Decision::Dismissed).await.map_err(|e| (id, e))
                    }
                    // The app sends nothing while disconnected; a race with a drop lands here.
                    (Action::Answer { id, .. } | Action::Dismiss { id } | Action::Decide { id, .. } | Action::DismissApproval { id }, None) => {
                        app.on_send_failed(id, "not connected to askbusd");
                        Ok(())
                    }
                };
                if let Err((id, e)) = sent {
                    app.on_send_failed(id, &e.to_string());
                }
            }
            Some(n) = async {
                let rx = pipe_ended.as_mut()?;
                rx.wait_for(Option::is_some).await.ok().and_then(|v| *v)
            } => {
                pipe_ended = None;
                if n > 0 {
                    app.on_piped_input(n);
                }
            }
            _ = tick.tick() => {}
            _ = term_signal.recv() => break,
            _ = hup.recv() => break,
            _ = int.recv() => break,
        }
    }
    Ok(())
}

/// The latest records, newest first (the daemon's `history` frame, on a connection of its
/// own: it shows this user's requests only, unless an operator's), within a few seconds.
async fn recent_history(socket: &Path) -> Result<Vec<askbus::history::HistoryRecord>, String> {
    let read = async {
        let mut conn = askbus::client::Connection::connect(socket).await?;
        let filter = askbus::protocol::HistoryFilter::default();
        conn.history(&filter, Some(history::RECENT), None).await
    };
    match tokio::time::timeout(Duration::from_secs(5), read).await {
        Ok(Ok((records, _))) => Ok(records),
        Ok(Err(e)) => Err(crate::fail::report(&e.into()).0),
        Err(_) => Err("askbusd did not answer within 5 s".into()),
    }
}

/// The subscription's next update, and the subscription back for the one after.
async fn next_update(mut sub: UiSubscription) -> (Result<UiUpdate, ClientError>, UiSubscription) {
    let update = sub.next().await;
    (update, sub)
}

/// Raw mode and the alternate screen for as long as it lives, restored on drop and on panic.
struct TerminalGuard {
    terminal: Terminal<CrosstermBackend<BufWriter<Stdout>>>,
}

impl TerminalGuard {
    fn enter() -> Result<TerminalGuard> {
        enable_raw_mode()?;
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            hook(info);
        }));
        let mut stdout = std::io::stdout();
        if let Err(e) = crossterm::execute!(stdout, EnterAlternateScreen, EnableBracketedPaste) {
            restore();
            return Err(e.into());
        }
        // Buffered so each frame reaches the terminal in one write, without tearing.
        let out = BufWriter::with_capacity(64 * 1024, stdout);
        let terminal = Terminal::new(CrosstermBackend::new(out))?;
        Ok(TerminalGuard { terminal })
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        let _ = self.terminal.show_cursor();
        restore();
    }
}

fn restore() {
    let mut stdout = std::io::stdout();
    let _ = crossterm::execute!(stdout, DisableBracketedPaste, LeaveAlternateScreen);
    let _ = disable_raw_mode();
    let _ = stdout.flush();
}
