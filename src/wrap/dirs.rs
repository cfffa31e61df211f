//! Where per-user configuration lives, resolved from the environment (HOME, XDG_CONFIG_HOME,
//! APPDATA) so tests and unusual setups can point it anywhere.

use std::path::PathBuf;

use super::WrapError;

/// The operating-system family that decides the conventional config locations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    Linux,
    Macos,
    Windows,
}

impl Os {
    pub fn current() -> Os {
        if cfg!(target_os = "macos") {
            Os::Macos
        } else if cfg!(windows) {
            Os::Windows
        } else {
            Os::Linux
        }
    }
}

/// The user's directories as the environment names them.
#[derive(Debug, Clone)]
pub struct Dirs {
    pub os: Os,
    pub home: Option<PathBuf>,
    pub xdg_config_home: Option<PathBuf>,
    pub appdata: Option<PathBuf>,
}

fn var(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

impl Dirs {
    pub fn from_env() -> Dirs {
        Dirs {
            os: Os::current(),
            home: var("HOME").or_else(|| var("USERPROFILE")),
            // The XDG spec says a relative value is to be ignored.
            xdg_config_home: var("XDG_CONFIG_HOME").filter(|p| p.is_absolute()),
            appdata: var("APPDATA"),
        }
    }

    pub fn home(&self) -> Result<PathBuf, WrapError> {
        self.home.clone().ok_or(WrapError::NoHome)
    }

    /// `$XDG_CONFIG_HOME`, else `~/.config` (Linux, and the tools that use it on macOS too).
    pub fn xdg_config(&self) -> Result<PathBuf, WrapError> {
        match &self.xdg_config_home {
            Some(dir) => Ok(dir.clone()),
            None => Ok(self.home()?.join(".config")),
        }
    }

    /// The per-user application-data folder: `~/Library/Application Support` on macOS,
    /// `%APPDATA%` on Windows, `$XDG_CONFIG_HOME` (or `~/.config`) on Linux.
    pub fn app_config(&self) -> Result<PathBuf, WrapError> {
        match self.os {
            Os::Macos => Ok(self.home()?.join("Library").join("Application Support")),
            Os::Windows => match &self.appdata {
                Some(dir) => Ok(dir.clone()),
                None => Err(WrapError::NoHome),
            },
            Os::Linux => self.xdg_config(),
        }
    }
}
