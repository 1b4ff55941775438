//! `rollstat completions`: shell completion scripts.

use crate::common::*;

/// `completions SHELL` prints that shell's script naming every command and their flags;
/// an unknown shell is a usage error listing the known ones.
#[test]
fn completions_cover_every_command() {
    for (shell, marker) in [("bash", "_rollstat()"), ("zsh", "#compdef rollstat"), ("fish", "complete -c rollstat")] {
        let o = run(&["completions", shell]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        let script = stdout(&o);
        assert!(script.contains(marker), "{shell}: {}", &script[..script.len().min(400)]);
        for word in ["aggregate", "profile", "compare", "export", "query", "batch-metrics", "rollouts", "key-metric"] {
            assert!(script.contains(word), "{shell} script lacks {word}");
        }
    }
    let o = run(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("bash") && stderr(&o).contains("zsh"), "{}", stderr(&o));
}
