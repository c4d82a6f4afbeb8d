//! The switch's end of the control channel: commands applied between bursts, and the punt
//! handler run inline in replay.

use super::*;

impl<P: BufPool, L: Pipeline<P>, A: Admission> Switch<P, L, A> {
    /// The switch's control channel (clone it for the control thread).
    pub fn channel(&self) -> Channel<L::Command> {
        self.channel.clone()
    }

    /// Control-channel counters (commands applied/refused, punts, latency histogram).
    pub fn control_stats(&self) -> &ControlStats {
        &self.st.ctl
    }

    /// Replay: handle punts inline with `handler`, each resulting command taking effect
    /// `latency_ns` after the punt (DESIGN.md section 3: a command takes effect at punt time plus
    /// the control latency). Live runs leave this unset and run the handler on the control thread.
    pub fn set_inline_control(
        &mut self,
        handler: Box<dyn PuntHandler<L::Command>>,
        latency_ns: Nanos,
    ) {
        self.inline_control = Some((handler, latency_ns));
    }

    /// Queue a command as the control plane would (tests, replay scripts): it takes effect at
    /// `at` or on the next [`Switch::apply_commands`] after it. `Err` gives it back when the
    /// ring is full (returned by value: boxing it would allocate).
    #[allow(clippy::result_large_err)]
    pub fn enqueue_command(
        &mut self,
        at: Nanos,
        cmd: Command<L::Command>,
    ) -> Result<(), Command<L::Command>> {
        let env = Envelope {
            seq: self.next_seq,
            at,
            issued_ns: at,
            cmd,
        };
        self.next_seq += 1;
        self.channel.commands.push(env).map_err(|e| e.cmd)
    }

    /// Run the inline control handler over the punts waiting in the ring (replay only).
    pub(super) fn run_inline_control(&mut self) {
        let Some((handler, latency)) = self.inline_control.as_mut() else {
            return;
        };
        // Every event step of a replay comes here: nothing to do without a punt (and no ring
        // handle to clone, an atomic add and sub).
        if self.channel.punts.is_empty() {
            return;
        }
        let latency = *latency;
        let ring = self.channel.commands.clone();
        let seq = &mut self.next_seq;
        let refused = &mut self.st.ctl.refused;
        while let Some(p) = self.channel.punts.pop() {
            let at = p.ts.saturating_add(latency);
            handler.on_punt(&p, &mut |cmd| {
                let env = Envelope {
                    seq: *seq,
                    at,
                    issued_ns: p.ts,
                    cmd,
                };
                *seq += 1;
                if ring.push(env).is_err() {
                    *refused += 1;
                }
            });
        }
    }

    /// Whether [`Switch::apply_commands`] has anything to look at: a held command, a queued
    /// one, or punts for the inline control. Without any it does nothing; the replay driver
    /// skips the call then (the emulator takes about 2.3 steps per hop, and a step's call with
    /// its two early returns was about 38 instructions).
    #[inline]
    pub fn commands_pending(&self) -> bool {
        self.held.is_some()
            || !self.channel.commands.is_empty()
            || (self.inline_control.is_some() && !self.channel.punts.is_empty())
    }

    /// Apply the commands that are due at `now` (at most [`COMMANDS_PER_POLL`]); `mono` reads
    /// the clock commands are stamped with, for the latency histogram (live:
    /// `control::mono_ns`; replay: `|| now`). It is read after each command is applied (or
    /// refused), never before: a command the control thread enqueued after the worker read its
    /// loop's `now` was recorded as 0 ns when the loop's time was used (issue 42: 22 of 203).
    /// Returns how many were applied or refused.
    pub fn apply_commands(&mut self, now: Nanos, mut mono: impl FnMut() -> u64) -> usize {
        self.run_inline_control();
        if self.held.is_none() && self.channel.commands.is_empty() {
            return 0;
        }
        let mut n = 0;
        while n < COMMANDS_PER_POLL {
            let env = match self.held.take() {
                Some(e) => e,
                None => match self.channel.commands.pop() {
                    Some(e) => e,
                    None => break,
                },
            };
            if env.at > now {
                self.held = Some(env);
                break;
            }
            n += 1;
            let issued = env.issued_ns;
            let ok = self.apply_one(now, env.cmd);
            self.st
                .ctl
                .latency_hist
                .record(mono().saturating_sub(issued));
            if ok {
                self.st.ctl.applied += 1;
            } else {
                self.st.ctl.refused += 1;
            }
        }
        n
    }

    pub(super) fn apply_one(&mut self, now: Nanos, cmd: Command<L::Command>) -> bool {
        match cmd {
            Command::Pipeline(c) => {
                let mut ctx = ctx!(self, now);
                let r = self.pipeline.command(&mut ctx, c);
                self.flush_emitted(now);
                r.is_ok()
            }
            Command::Inject {
                port,
                recirculate,
                frame,
            } => {
                let Some(idx) = self.port_idx(port) else {
                    return false;
                };
                self.st.stats.injected += 1;
                let Some(mut pkt) = self.st.pool.alloc_from(&frame) else {
                    self.st.stats.drops.inc(DropReason::PoolEmpty);
                    return false;
                };
                let m = pkt.meta_mut();
                m.ingress_port = port;
                m.rx_ts = now;
                if recirculate {
                    self.recirculate(now, pkt);
                } else {
                    self.receive_one(idx, now, pkt);
                }
                true
            }
            Command::SetPortRate { port, rate_bps } => match self.port_idx(port) {
                Some(i) => {
                    self.st.ports[i].tm.set_rate(rate_bps);
                    self.st.ports[i].info.rate_bps = rate_bps;
                    self.st.infos[i].rate_bps = rate_bps;
                    true
                }
                None => false,
            },
            Command::Snapshot { .. } => true,
        }
    }
}
