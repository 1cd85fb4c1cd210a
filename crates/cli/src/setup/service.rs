//! The daemon as a user service, for `setup --service`: a systemd user
//! unit or a launchd agent, written (never started behind the user's
//! back: setup prints the command that starts it).

use std::path::{Path, PathBuf};

use clap::ValueEnum;

/// Which service manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Service {
    /// `~/.config/systemd/user/actiongate.service`.
    Systemd,
    /// `~/Library/LaunchAgents/dev.actiongate.daemon.plist`.
    Launchd,
}

/// The unit file's path, its text, and the command that starts it.
pub fn unit(
    service: Service,
    home: &Path,
    exe: &Path,
    data_dir: &Path,
    listen: &str,
) -> (PathBuf, String, String) {
    let exe = exe.display();
    let data = data_dir.display();
    match service {
        Service::Systemd => (
            home.join(".config/systemd/user/actiongate.service"),
            format!(
                "[Unit]\nDescription=actiongate: gates what AI agents do\n\n[Service]\n\
                 ExecStart=\"{exe}\" --data-dir \"{data}\" serve --listen {listen}\n\
                 Restart=on-failure\n\n[Install]\nWantedBy=default.target\n"
            ),
            "systemctl --user daemon-reload && systemctl --user enable --now actiongate".to_owned(),
        ),
        Service::Launchd => {
            let path = home.join("Library/LaunchAgents/dev.actiongate.daemon.plist");
            let text = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
                 <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
                 <plist version=\"1.0\">\n<dict>\n\
                 \t<key>Label</key><string>dev.actiongate.daemon</string>\n\
                 \t<key>ProgramArguments</key>\n\t<array>\n\
                 \t\t<string>{exe}</string>\n\t\t<string>--data-dir</string>\n\t\t<string>{data}</string>\n\
                 \t\t<string>serve</string>\n\t\t<string>--listen</string>\n\t\t<string>{listen}</string>\n\
                 \t</array>\n\t<key>RunAtLoad</key><true/>\n\t<key>KeepAlive</key><true/>\n\
                 </dict>\n</plist>\n"
            );
            let start = format!("launchctl load -w {}", path.display());
            (path, text, start)
        }
    }
}
