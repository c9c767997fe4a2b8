//! The borrows the router hands its components: each macro names the shell's fields one by
//! one, so that one component can be borrowed mutably beside what it reads of the rest. Macros
//! (not methods) because a method borrowing `&mut self` would hold the whole shell.
//!
//! Owns nothing. Must not: name a field a component does not need (each borrow is what the
//! component's struct lists).

/// What the control and metrics components read of the rest to answer.
macro_rules! view {
    ($shell:ident) => {
        $crate::runtime::shell::control::View {
            core: &$shell.core,
            slots: &$shell.runs.slots,
            probe_stats: &$shell.probe_stats,
            started_wall: $shell.started_wall,
            last_reload: $shell.loaded.last_reload,
        }
    };
}

/// The link through which a component reaches the core.
macro_rules! link {
    ($shell:ident) => {
        $crate::runtime::shell::component::Link {
            core: &mut $shell.core,
            notifier: &mut $shell.notifier,
            notify: &mut $shell.notify,
            probe_stats: &mut $shell.probe_stats,
            config: &$shell.loaded.config,
        }
    };
}

/// What an upgrade reads and fills in of the rest.
macro_rules! parts {
    ($shell:ident) => {
        $crate::runtime::shell::upgrade::Parts {
            core: &mut $shell.core,
            loaded: &$shell.loaded,
            runs: &mut $shell.runs,
            control: &mut $shell.control,
            metrics: &$shell.metrics,
            notifier: &mut $shell.notifier,
            notify: &mut $shell.notify,
            probe_stats: &mut $shell.probe_stats,
            signals: &mut $shell.signals,
            started_at: &mut $shell.started_at,
        }
    };
}
