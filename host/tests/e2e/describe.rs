//! `describe` as a boundary on the real control plane (issue 17, class 4 and the describe
//! part of 6), with the real `wasmop run` binary: hostile declarations are rejected at load
//! (logged, counted), and nothing they said reaches `/metrics`, `/status` or `wasmop status`
//! raw; looping describes end at describe's own deadline while a healthy plugin reloads.
//! Outcomes and the order of events only, never timings.

#![allow(clippy::unwrap_used)]

use crate::harness::{Host, message};
use serde_json::Value;
use wasmop_testenv::TestEnv;

const HOSTILE: [&str; 4] = [
    "describe-forged-version",
    "describe-huge",
    "describe-duplicates",
    "describe-bad-kinds",
];

/// The healthy plugin (`reload-probe`) confined to the test's namespace.
fn config(env: &TestEnv, extra: &str) -> String {
    format!(
        "resyncPeriod: 0s\n{extra}plugins:\n  reload-probe:\n    namespaces: [{}]\n",
        env.namespace()
    )
}

fn guest(name: &str) -> Vec<u8> {
    std::fs::read(wasmop_test_guests::component(name)).unwrap()
}

fn rejected_key(line: &Value) -> Option<&str> {
    (message(line) == "plugin version rejected")
        .then(|| line["fields"]["key"].as_str())
        .flatten()
}

/// Whether `line` is a line of the Prometheus text format: a comment, or `name{labels} value`
/// with every label value quoted and escaped.
fn exposition_line(line: &str) -> bool {
    if line.is_empty() || line.starts_with('#') {
        return true;
    }
    let name_end = line.find(['{', ' ']).unwrap_or(line.len());
    let (name, mut rest) = line.split_at(name_end);
    let name_ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
    if !name_ok {
        return false;
    }
    if let Some(labels) = rest.strip_prefix('{') {
        let mut chars = labels.char_indices();
        let mut in_value = false;
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match (in_value, c) {
                (true, '\\') => {
                    if !matches!(chars.next(), Some((_, '\\' | '"' | 'n'))) {
                        return false;
                    }
                }
                (true, '"') => in_value = false,
                (true, '\n') => return false,
                (true, _) => {}
                (false, '"') => in_value = true,
                (false, '}') => {
                    end = Some(i);
                    break;
                }
                (false, c) if c.is_ascii_alphanumeric() || matches!(c, '_' | '=' | ',') => {}
                _ => return false,
            }
        }
        let Some(end) = end else { return false };
        rest = &labels[end + 1..];
    }
    rest.strip_prefix(' ').is_some_and(|v| {
        v.split(' ')
            .next()
            .is_some_and(|v| v.parse::<f64>().is_ok())
    })
}

fn no_raw_controls(what: &str, text: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|&c| {
            (c.is_control() && c != '\n')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}')
        })
        .collect();
    assert!(bad.is_empty(), "{what} shows raw {bad:?}:\n{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_declarations_are_rejected_and_nothing_they_said_is_shown_raw() {
    let env = TestEnv::start().await.unwrap();
    let mut plugins = vec!["reload-v1"];
    plugins.extend(HOSTILE);
    // A describe deadline far beyond what building 200,000 entries takes on a busy machine
    // (the host's Winch code at first), so that each is refused for what it declared.
    let extra = "describeDeadline: 60s\n";
    let mut host = Host::start(&env, &plugins, &config(&env, extra)).await;
    let rejections = host
        .wait_lines("every hostile declaration to be rejected", |lines| {
            let found: Vec<Value> = lines
                .iter()
                .filter(|l| {
                    rejected_key(l)
                        .is_some_and(|k| HOSTILE.iter().any(|h| k == format!("{h}.wasm")))
                })
                .cloned()
                .collect();
            (found.len() == HOSTILE.len()).then_some(found)
        })
        .await;
    for line in &rejections {
        let key = rejected_key(line).unwrap();
        let error = line["fields"]["error"].as_str().unwrap();
        let names_field = match key {
            "describe-forged-version.wasm" => error.contains("version `1.0.0\""),
            "describe-huge.wasm" => {
                (error.contains("version `") || error.contains("name `"))
                    && error.contains("(50331648 bytes)")
            }
            "describe-duplicates.wasm" => {
                error.contains("lists 200000 entries; at most 32 are accepted")
            }
            _ => error.contains("is not") || error.contains("does not parse"),
        };
        assert!(names_field, "{key}: {error}");
        assert!(
            error.len() < 2000,
            "{key}: the error carries the value whole"
        );
        no_raw_controls(key, error);
    }
    host.wait_log("the healthy plugin to load", |l| {
        message(l) == "plugin loaded" && l["fields"]["plugin"] == "reload-probe"
    })
    .await;
    let log = host.log_text();
    assert!(
        log.len() < 4 << 20,
        "the log carries a huge value: {} bytes",
        log.len()
    );

    let metrics = host.metrics().await;
    let (_, body) = metrics.split_once("\r\n\r\n").unwrap();
    assert!(
        host.metric(r#"wasmop_plugin_reloads_total{plugin="unknown",result="rejected"}"#)
            .await
            >= HOSTILE.len() as f64,
        "{body}"
    );
    let unparseable: Vec<&str> = body.lines().filter(|l| !exposition_line(l)).collect();
    assert!(unparseable.is_empty(), "{unparseable:#?}");
    assert!(!body.contains("wasmop_forged"), "{body}");
    assert!(body.len() < 1 << 20, "/metrics is {} bytes", body.len());
    no_raw_controls("/metrics", body);

    let (code, status) = host.probe("/status").await;
    assert_eq!(code, 200, "{status}");
    assert!(status.len() < 1 << 20, "/status is {} bytes", status.len());
    no_raw_controls("/status", &status);
    // Only the healthy plugin runs: no entry, version or digest a declaration forged. Each
    // hostile file is listed as refused, its error the log's: what it declared is quoted
    // escaped and cut, never taken for a field of its own.
    let json: Value = serde_json::from_str(&status).unwrap();
    let plugins = json["plugins"].as_object().unwrap();
    assert_eq!(
        plugins.keys().collect::<Vec<_>>(),
        ["reload-probe"],
        "{status}"
    );
    assert_eq!(plugins["reload-probe"]["version"], "1", "{status}");
    let refused = json["refused"].as_object().unwrap();
    for hostile in HOSTILE {
        let (_, entry) = refused
            .iter()
            .find(|(k, _)| k.starts_with(&format!("{hostile}.wasm in directory ")))
            .unwrap_or_else(|| panic!("{hostile} is not listed as refused: {status}"));
        let error = entry["error"].as_str().unwrap();
        assert!(error.len() < 2000, "{hostile}: {error}");
        assert!(
            error.contains("the plugin's declaration is invalid"),
            "{error}"
        );
    }
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(["status", "--address", host.health_address()])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    no_raw_controls("wasmop status", &stdout);
    assert!(stdout.contains("reload-probe"), "{stdout}");
    // No row a declaration forged (`other  9.9.9  sha256:forged  running`): every line is the
    // host's, the table's header, the healthy plugin's row or a refusal on a line of its own.
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3 + HOSTILE.len(), "{stdout}");
    assert!(
        lines.iter().all(|l| l.starts_with("host: ")
            || l.starts_with("PLUGIN ")
            || l.starts_with("reload-probe ")
            || l.starts_with("refused ")),
        "{stdout}"
    );
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn looping_describes_end_at_describes_deadline_while_a_healthy_plugin_reloads() {
    let env = TestEnv::start().await.unwrap();
    // Longer than any describe of a healthy plugin on a busy machine, far shorter than the
    // call deadline (10 s) the loops once held a load for.
    let extra = "describeDeadline: 3s\n";
    let mut host = Host::start(&env, &["reload-v1"], &config(&env, extra)).await;
    host.wait_log("the healthy plugin to load", |l| {
        message(l) == "plugin loaded" && l["fields"]["plugin"] == "reload-probe"
    })
    .await;
    let dir = host.plugin_dir().to_owned();
    // Three looping describes at once, then a new version of the healthy plugin.
    for i in 1..=3 {
        tokio::fs::write(dir.join(format!(".loop-{i}.tmp")), guest("describe-loop"))
            .await
            .unwrap();
        tokio::fs::rename(
            dir.join(format!(".loop-{i}.tmp")),
            dir.join(format!("loop-{i}.wasm")),
        )
        .await
        .unwrap();
    }
    tokio::fs::write(dir.join(".reload-v1.wasm.tmp"), guest("reload-v2"))
        .await
        .unwrap();
    tokio::fs::rename(dir.join(".reload-v1.wasm.tmp"), dir.join("reload-v1.wasm"))
        .await
        .unwrap();
    let (loops, swapped) = host
        .wait_lines("the loops' rejections and the healthy swap", |lines| {
            let loops: Vec<String> = lines
                .iter()
                .filter(|l| rejected_key(l).is_some_and(|k| k.starts_with("loop-")))
                .map(|l| l["fields"]["error"].as_str().unwrap_or("").to_owned())
                .collect();
            let swapped = lines
                .iter()
                .any(|l| message(l) == "plugin version swapped" && l["fields"]["version"] == "2");
            (loops.len() == 3 && swapped).then_some((loops, swapped))
        })
        .await;
    assert!(swapped);
    for error in &loops {
        assert!(
            error.contains("`describe` failed")
                && error.contains("did not finish within its deadline of 3000 ms"),
            "a loop ends at describe's deadline, not the call deadline: {error}"
        );
    }
    host.stop().await;
}

#[test]
fn the_exposition_check_tells_forged_lines_from_real_ones() {
    for good in [
        "# HELP wasmop_plugin_info x",
        r#"wasmop_plugin_info{plugin="p",version="1\"} 1\n",digest="d"} 1"#,
        "process_start_time_seconds 1.7e9",
    ] {
        assert!(exposition_line(good), "{good}");
    }
    for bad in [
        r#"wasmop_plugin_info{plugin="p",version="1.0.0",digest="sha256:forged"} 1"x"#,
        "wasmop_plugin_info{plugin=\"x\r",
        "other  9.9.9  sha256:forged  running  0  0",
        "\u{1b}[2J\u{1b}[31m\u{202e}lmao",
    ] {
        assert!(!exposition_line(bad), "{bad}");
    }
}
