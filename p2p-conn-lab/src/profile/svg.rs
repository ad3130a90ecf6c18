//! What `profile` draws: the sampled stacks as flamegraph input, with the
//! async runtime's frames folded, and a footer under the picture with the
//! run's figures, so that the SVG keeps what the terminal showed.
//!
//! # Folding
//! A tokio task's stack starts with a dozen or more frames of the runtime
//! (the worker loop, the task harness, `std::panicking::try` around each
//! poll, `FnOnce` glue), and a thread's with the C library's and std's
//! start-up (and closure calls go through `FnOnce` glue). In a flamegraph they make most of the picture's height and
//! push the code that spends the time into narrow towers. Each run of such
//! frames becomes one frame, [`RUNTIME`]; the innermost frame of a sample
//! is always kept as sampled, so time spent in the runtime itself (its
//! scheduler, parking) still shows by name. `profile --raw-stacks` draws
//! the stacks as sampled.
//!
//! Not provided: folding of other runtimes' frames (async-std, smol), or of
//! frames inside the application's own code.

use std::collections::BTreeMap;

/// The one frame a run of runtime frames becomes.
pub const RUNTIME: &str = "[runtime, thread start and call glue]";

/// Whether a (demangled) function name belongs to the runtime or thread
/// start-up rather than to the code it runs.
pub fn is_runtime(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "tokio::runtime::",
        "tokio::task::",
        "tokio::loom::",
        "std::panicking::",
        "std::panic::",
        "core::panic::",
        "std::rt::",
        "std::sys::pal::unix::thread::",
        "std::sys::thread::",
        "std::sys::backtrace::",
        "std::thread::",
        "core::ops::function::",
        "__rust_",
        "__libc_start",
        "start_thread",
        "__clone",
        "clone3",
        "_start",
    ];
    // `<T as Trait>::f`: the runtime's own types, and the closure and
    // future glue every task goes through.
    let bare = name.strip_prefix('<').unwrap_or(name);
    PREFIXES.iter().any(|p| bare.starts_with(p))
        || name == "main"
        || (name.starts_with('<') && name.contains(" as core::ops::function::Fn"))
        || name.starts_with("<core::pin::Pin<P> as core::future::future::Future>::poll")
}

/// `frames` (outermost first) with each run of runtime frames folded into
/// one [`RUNTIME`] frame; the innermost frame stays as it is.
pub fn fold(frames: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(frames.len());
    let last = frames.len().saturating_sub(1);
    for (i, f) in frames.iter().enumerate() {
        if i != last && is_runtime(f) {
            if out.last().map(String::as_str) != Some(RUNTIME) {
                out.push(RUNTIME.to_string());
            }
        } else {
            out.push(f.clone());
        }
    }
    out
}

/// One sample group: the thread's name, its frames outermost first, and
/// how many samples had this stack.
pub struct Stack {
    pub thread: String,
    pub frames: Vec<String>,
    pub count: u64,
}

/// The flamegraph's input: one `thread;outer;…;leaf COUNT` line per
/// distinct stack (folded unless `raw`), sorted, stacks that fold to the
/// same line merged. A `;` in a name (`[u8; 32]`) would split the frame:
/// it becomes `,`.
pub fn lines(stacks: impl IntoIterator<Item = Stack>, raw: bool) -> Vec<String> {
    let mut merged: BTreeMap<String, u64> = BTreeMap::new();
    for s in stacks {
        let frames = if raw { s.frames } else { fold(&s.frames) };
        let mut line = s.thread.replace(';', ",");
        for f in &frames {
            line.push(';');
            line.push_str(&f.replace(';', ","));
        }
        *merged.entry(line).or_default() += s.count;
    }
    merged
        .into_iter()
        .map(|(line, n)| format!("{line} {n}"))
        .collect()
}

/// Spacing of the footer's lines, px (the flamegraph's text is 12 px).
const LINE_H: usize = 16;

/// `svg` (a flamegraph as inferno draws it) with `footer` written under the
/// picture, one `<text>` per line in the flamegraph's monospace font, the
/// picture made taller to hold them. `None` if `svg` does not have the
/// root element's `height="H"` and `viewBox="0 0 W H"` this expects.
pub fn with_footer(svg: &str, footer: &[String]) -> Option<String> {
    let root_start = svg.find("<svg ")?;
    let root_end = root_start + svg[root_start..].find('>')?;
    let root = &svg[root_start..root_end];
    let h: usize = attr(root, "height")?.parse().ok()?;
    let view = attr(root, "viewBox")?;
    let w = view.strip_prefix("0 0 ")?.strip_suffix(&format!(" {h}"))?;
    let close = svg.rfind("</svg>")?;
    // Long lines wrap at a space to the picture's width (the monospace
    // font's characters are 0.59 em wide), continued with an indent.
    let most = ((w.parse::<f64>().ok()? - 20.0) / (0.59 * 12.0)) as usize;
    let footer: Vec<String> = footer.iter().flat_map(|l| wrap(l, most.max(40))).collect();
    let extra = LINE_H * footer.len() + LINE_H;
    let new_h = h + extra;
    let new_root = root
        .replacen(
            &format!("height=\"{h}\""),
            &format!("height=\"{new_h}\""),
            1,
        )
        .replacen(
            &format!("viewBox=\"0 0 {w} {h}\""),
            &format!("viewBox=\"0 0 {w} {new_h}\""),
            1,
        );
    let mut text = format!(
        "<g id=\"footer\"><rect x=\"0\" y=\"{h}\" width=\"100%\" height=\"{extra}\" fill=\"#ffffff\"/>"
    );
    for (i, l) in footer.iter().enumerate() {
        text.push_str(&format!(
            "<text x=\"10\" y=\"{}\" xml:space=\"preserve\" style=\"white-space:pre\">{}</text>",
            h + LINE_H * (i + 1),
            p2p_conn_cli::output::svg::xml_escape(l)
        ));
    }
    text.push_str("</g>");
    Some(format!(
        "{}{new_root}{}{text}{}",
        &svg[..root_start],
        &svg[root_end..close],
        &svg[close..]
    ))
}

/// `line` in pieces of at most `most` characters, broken at spaces where
/// there are some, each piece after the first indented by four spaces.
fn wrap(line: &str, most: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    let mut indent = "";
    while rest.chars().count() + indent.len() > most {
        let room = most - indent.len();
        let cut = rest.char_indices().nth(room).map_or(rest.len(), |(i, _)| i);
        let at = rest[..cut].rfind(' ').filter(|&i| i > 0).unwrap_or(cut);
        out.push(format!("{indent}{}", &rest[..at]));
        rest = rest[at..].trim_start();
        indent = "    ";
    }
    out.push(format!("{indent}{rest}"));
    out
}

/// The value of `name="…"` in a start tag.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let at = tag.find(&key)? + key.len();
    let len = tag[at..].find('"')?;
    Some(&tag[at..at + len])
}

/// The CPU as `/proc/cpuinfo` names it, and whether it has AVX-512 IFMA
/// (which decides the default backend's speed); `None` where that file
/// does not say.
pub fn cpu() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let model = info
        .lines()
        .find_map(|l| l.strip_prefix("model name"))?
        .trim_start_matches([' ', '\t', ':'])
        .to_string();
    let ifma = info
        .lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|l| l.split_whitespace().any(|f| f == "avx512ifma"));
    let cpus = info.lines().filter(|l| l.starts_with("processor")).count();
    Some(format!(
        "{model}, {cpus} CPUs, {} AVX-512 IFMA",
        if ifma { "with" } else { "without" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    /// A tokio worker's stack as a debug build samples it (names from a
    /// real `profile` run), folded to one runtime frame above the task.
    #[test]
    fn a_tokio_tasks_runtime_frames_fold_into_one() {
        let stack = v(&[
            "__clone3",
            "start_thread",
            "std::sys::pal::unix::thread::Thread::new::thread_start",
            "<alloc::boxed::Box<F,A> as core::ops::function::FnOnce<Args>>::call_once",
            "std::thread::Builder::spawn_unchecked_::{{closure}}",
            "std::panicking::try",
            "tokio::runtime::blocking::pool::Inner::run",
            "tokio::runtime::scheduler::multi_thread::worker::run",
            "tokio::runtime::task::raw::poll",
            "tokio::runtime::task::harness::Harness<T,S>::poll",
            "std::panic::catch_unwind",
            "<core::panic::unwind_safe::AssertUnwindSafe<F> as core::ops::function::FnOnce<()>>::call_once",
            "tokio::runtime::task::core::Core<T,S>::poll",
            "tokio::loom::std::unsafe_cell::UnsafeCell<T>::with_mut",
            "p2p_conn::bench::transfer::run_ours::{{closure}}",
            "<core::pin::Pin<P> as core::future::future::Future>::poll",
            "p2p_conn::io::tokio::WriteHalf::send::{{closure}}",
            "p2p_conn::engine::writer::FrameWriter::poll_drain",
            "tokio::runtime::io::registration::Registration::poll_ready",
            "mio::net::tcp::stream::TcpStream::write",
            "__send",
        ]);
        assert_eq!(
            fold(&stack),
            v(&[
                RUNTIME,
                "p2p_conn::bench::transfer::run_ours::{{closure}}",
                RUNTIME,
                "p2p_conn::io::tokio::WriteHalf::send::{{closure}}",
                "p2p_conn::engine::writer::FrameWriter::poll_drain",
                RUNTIME,
                "mio::net::tcp::stream::TcpStream::write",
                "__send",
            ])
        );
        // Time in the runtime itself keeps its leaf's name.
        let idle = v(&[
            "start_thread",
            "tokio::runtime::scheduler::multi_thread::worker::run",
            "tokio::runtime::scheduler::multi_thread::park::Parker::park",
        ]);
        assert_eq!(
            fold(&idle),
            v(&[
                RUNTIME,
                "tokio::runtime::scheduler::multi_thread::park::Parker::park"
            ])
        );
        assert!(fold(&[]).is_empty());
    }

    #[test]
    fn lines_merge_what_folds_alike_and_keep_raw_stacks() {
        let a = Stack {
            thread: "tokio-runtime-worker".into(),
            frames: v(&["start_thread", "tokio::runtime::task::raw::poll", "f", "g"]),
            count: 3,
        };
        let b = Stack {
            thread: "tokio-runtime-worker".into(),
            frames: v(&["start_thread", "std::panicking::try", "f", "g"]),
            count: 2,
        };
        let c = Stack {
            thread: "main".into(),
            frames: v(&["<[u8; 32] as h>::i"]),
            count: 1,
        };
        let folded = lines(
            [
                Stack {
                    thread: a.thread.clone(),
                    frames: a.frames.clone(),
                    count: 3,
                },
                Stack {
                    thread: b.thread.clone(),
                    frames: b.frames.clone(),
                    count: 2,
                },
            ],
            false,
        );
        assert_eq!(
            folded,
            vec![format!("tokio-runtime-worker;{RUNTIME};f;g 5")]
        );
        let raw = lines([a, b, c], true);
        assert_eq!(
            raw,
            vec![
                "main;<[u8, 32] as h>::i 1".to_string(),
                "tokio-runtime-worker;start_thread;std::panicking::try;f;g 2".to_string(),
                "tokio-runtime-worker;start_thread;tokio::runtime::task::raw::poll;f;g 3"
                    .to_string(),
            ]
        );
    }

    #[test]
    fn the_footer_is_under_the_picture_and_escaped() {
        let svg = "<?xml version=\"1.0\"?><svg version=\"1.1\" width=\"1200\" height=\"390\" \
                   onload=\"init(evt)\" viewBox=\"0 0 1200 390\"><svg id=\"frames\"></svg>\
                   <text id=\"details\" y=\"373\"> </text></svg>";
        let footer = v(&[
            "  send: 1 s of sealing needed 1.23 s of socket write",
            "a < b & c",
        ]);
        let out = with_footer(svg, &footer).expect("drawn");
        assert!(
            out.contains("height=\"438\"") && out.contains("viewBox=\"0 0 1200 438\""),
            "{out}"
        );
        assert!(out.contains(
            "y=\"406\" xml:space=\"preserve\" style=\"white-space:pre\">  send: 1 s of sealing needed 1.23 s of socket write</text>"
        ), "{out}");
        assert!(out.contains(">a &lt; b &amp; c</text>"), "{out}");
        assert!(out.ends_with("</g></svg>"), "{out}");
        assert!(out.contains("<svg id=\"frames\"></svg>"));
        assert_eq!(with_footer("<svg width=\"1\">", &footer), None);
        // A line wider than the picture wraps at a space.
        let long = vec![format!("{} tail", "word ".repeat(60))];
        let out = with_footer(svg, &long).expect("drawn");
        assert_eq!(out.matches("<text x=\"10\"").count(), 2, "{out}");
        assert!(out.contains(">    word word"), "{out}");
    }

    #[test]
    fn wrap_breaks_at_spaces_or_anywhere() {
        assert_eq!(wrap("short", 40), vec!["short"]);
        assert_eq!(wrap("aaa bbb ccc", 8), vec!["aaa bbb", "    ccc"]);
        assert_eq!(wrap("abcdefghij", 6), vec!["abcdef", "    gh", "    ij"]);
    }
}
