//! Which inbound connections a listener keeps: pure state, no sockets, no
//! clock (connections are ordered by their accept, so "oldest" needs
//! none). The tokio side ([`super::Gate`]) asks [`Admission::admit`] for a
//! verdict on each accept and tells it how far each connection has come
//! ([`Admission::authenticated`], [`Admission::serving`]) and when it ends
//! ([`Admission::release`]).
//!
//! The rules:
//! - At most `max_per_ip` connections open from one IP address: past it a
//!   newcomer is refused, whatever else is open. Nothing is evicted for
//!   it, so the limit means what it says, and one address cannot push out
//!   the others.
//! - At most `max_open` connections open in all. When full, the newcomer
//!   takes the slot of the oldest connection that has not authenticated
//!   (still in its handshake), or if there is none, of the oldest that
//!   authenticated and has not been served (idle): an honest visit takes
//!   a few round trips, so the oldest waiting connection is the one least
//!   likely to be a visitor, and a visitor that has authenticated is
//!   pushed out only by peers that authenticated too (each a handshake's
//!   work), never by a stream of bare connections. Only when every open
//!   connection is being served is the newcomer refused.
//! - A connection being served (its answer on the way) is never evicted:
//!   it ends by itself, within its own bound.
//!
//! Every connection has a payload `T`, handed back when the connection is
//! evicted or released (the tokio side keeps there what stops its task).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

/// The bounds of one listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most connections open at once.
    pub max_open: usize,
    /// Most connections open at once from one IP address.
    pub max_per_ip: usize,
}

/// One admitted connection, in accept order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(u64);

/// What to do with a connection just accepted.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict<T> {
    /// Keep it; if `evicted` is given, that connection (its ticket and
    /// payload) no longer counts and is to be closed.
    Admit {
        ticket: Ticket,
        evicted: Option<(Ticket, T)>,
    },
    /// Close it: its IP address has `max_per_ip` open.
    RefusePerIp,
    /// Close it: `max_open` connections are open and all are being served.
    RefuseFull,
}

/// How far a connection has come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// In its handshake: evicted first.
    Unproven,
    /// Authenticated, not served yet: evicted when no connection is
    /// unproven.
    Authenticated,
    /// Being served: never evicted.
    Serving,
}

struct Slot<T> {
    ip: IpAddr,
    stage: Stage,
    payload: T,
}

/// The connections open on one listener (see the module's rules).
pub struct Admission<T> {
    limits: Limits,
    /// Every open connection, oldest first.
    open: BTreeMap<Ticket, Slot<T>>,
    /// Those of `open` in [`Stage::Unproven`], oldest first.
    unproven: BTreeSet<Ticket>,
    /// Those of `open` in [`Stage::Authenticated`], oldest first.
    authenticated: BTreeSet<Ticket>,
    per_ip: HashMap<IpAddr, usize>,
    next: u64,
}

impl<T> Admission<T> {
    /// `limits`' zeroes are taken as 1.
    pub fn new(limits: Limits) -> Self {
        Admission {
            limits: Limits {
                max_open: limits.max_open.max(1),
                max_per_ip: limits.max_per_ip.max(1),
            },
            open: BTreeMap::new(),
            unproven: BTreeSet::new(),
            authenticated: BTreeSet::new(),
            per_ip: HashMap::new(),
            next: 0,
        }
    }

    /// The verdict on a connection from `ip`, just accepted; an admitted
    /// one counts until [`Admission::release`] (or its eviction).
    pub fn admit(&mut self, ip: IpAddr, payload: T) -> Verdict<T> {
        if self.per_ip.get(&ip).copied().unwrap_or(0) >= self.limits.max_per_ip {
            return Verdict::RefusePerIp;
        }
        let evicted = if self.open.len() >= self.limits.max_open {
            let oldest = self.unproven.first().or(self.authenticated.first());
            let Some(&victim) = oldest else {
                return Verdict::RefuseFull;
            };
            self.remove(victim)
        } else {
            None
        };
        let ticket = Ticket(self.next);
        self.next += 1;
        *self.per_ip.entry(ip).or_default() += 1;
        self.open.insert(
            ticket,
            Slot {
                ip,
                stage: Stage::Unproven,
                payload,
            },
        );
        self.unproven.insert(ticket);
        Verdict::Admit { ticket, evicted }
    }

    /// `ticket`'s peer has authenticated: evicted only when no connection
    /// is unproven. (Nothing if it is gone or further along.)
    pub fn authenticated(&mut self, ticket: Ticket) {
        self.advance(ticket, Stage::Authenticated);
    }

    /// `ticket`'s connection is being served: no longer evicted. (Nothing
    /// if it is gone.)
    pub fn serving(&mut self, ticket: Ticket) {
        self.advance(ticket, Stage::Serving);
    }

    fn advance(&mut self, ticket: Ticket, to: Stage) {
        let Some(s) = self.open.get_mut(&ticket) else {
            return;
        };
        match (s.stage, to) {
            (Stage::Unproven, Stage::Authenticated | Stage::Serving) => {
                self.unproven.remove(&ticket);
            }
            (Stage::Authenticated, Stage::Serving) => {
                self.authenticated.remove(&ticket);
            }
            _ => return,
        }
        s.stage = to;
        if to == Stage::Authenticated {
            self.authenticated.insert(ticket);
        }
    }

    /// `ticket`'s connection ended: its payload, or `None` if it was
    /// evicted (or released) already.
    pub fn release(&mut self, ticket: Ticket) -> Option<T> {
        self.remove(ticket).map(|(_, p)| p)
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.len()
    }

    /// Connections open now from `ip`.
    #[cfg(test)]
    pub fn open_from(&self, ip: IpAddr) -> usize {
        self.per_ip.get(&ip).copied().unwrap_or(0)
    }

    fn remove(&mut self, ticket: Ticket) -> Option<(Ticket, T)> {
        let slot = self.open.remove(&ticket)?;
        match slot.stage {
            Stage::Unproven => self.unproven.remove(&ticket),
            Stage::Authenticated => self.authenticated.remove(&ticket),
            Stage::Serving => false,
        };
        if let Some(n) = self.per_ip.get_mut(&slot.ip) {
            *n -= 1;
            if *n == 0 {
                self.per_ip.remove(&slot.ip);
            }
        }
        Some((ticket, slot.payload))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn admitted<T: std::fmt::Debug>(v: Verdict<T>) -> (Ticket, Option<(Ticket, T)>) {
        match v {
            Verdict::Admit { ticket, evicted } => (ticket, evicted),
            other => panic!("not admitted: {other:?}"),
        }
    }

    #[test]
    fn when_full_the_oldest_waiting_connection_makes_room() {
        let mut a = Admission::new(Limits {
            max_open: 3,
            max_per_ip: 4,
        });
        let (t0, e) = admitted(a.admit(ip(2), "a"));
        assert_eq!(e, None);
        let (t1, _) = admitted(a.admit(ip(3), "b"));
        let (t2, _) = admitted(a.admit(ip(4), "c"));
        // Full: the oldest (t0) goes, with its payload.
        let (t3, e) = admitted(a.admit(ip(5), "d"));
        assert_eq!(e, Some((t0, "a")));
        assert_eq!(a.open(), 3);
        assert_eq!(a.open_from(ip(2)), 0);
        // Its own release later changes nothing.
        assert_eq!(a.release(t0), None);
        assert_eq!(a.open(), 3);
        // Being served protects: t1 is skipped, t2 is the oldest waiting.
        a.serving(t1);
        a.authenticated(t1); // never back
        let (_, e) = admitted(a.admit(ip(6), "e"));
        assert_eq!(e, Some((t2, "c")));
        assert_eq!(a.release(t1), Some("b"));
        assert_eq!(a.open(), 2);
        // A free slot again: no eviction.
        let (_, e) = admitted(a.admit(ip(7), "f"));
        assert_eq!(e, None);
        assert!(a.release(t3).is_some());
    }

    #[test]
    fn unproven_connections_go_before_authenticated_ones() {
        let mut a = Admission::new(Limits {
            max_open: 3,
            max_per_ip: 4,
        });
        let (t0, _) = admitted(a.admit(ip(2), 0));
        let (t1, _) = admitted(a.admit(ip(3), 1));
        let (t2, _) = admitted(a.admit(ip(4), 2));
        a.authenticated(t0);
        a.authenticated(t1);
        // t2 is the youngest, but the only one unproven.
        let (t3, e) = admitted(a.admit(ip(5), 3));
        assert_eq!(e, Some((t2, 2)));
        // t3 likewise: a stream of bare connections never reaches t0, t1.
        let (t4, e) = admitted(a.admit(ip(6), 4));
        assert_eq!(e, Some((t3, 3)));
        // Once none is unproven, the oldest authenticated goes.
        a.authenticated(t4);
        let (_, e) = admitted(a.admit(ip(7), 5));
        assert_eq!(e, Some((t0, 0)));
        assert_eq!(a.open(), 3);
    }

    #[test]
    fn when_every_connection_is_being_served_the_newcomer_is_refused() {
        let mut a = Admission::new(Limits {
            max_open: 2,
            max_per_ip: 2,
        });
        let (t0, _) = admitted(a.admit(ip(2), ()));
        let (t1, _) = admitted(a.admit(ip(3), ()));
        a.serving(t0);
        a.serving(t1);
        a.serving(t1); // twice counts once
        assert_eq!(a.admit(ip(4), ()), Verdict::RefuseFull);
        assert_eq!(a.open(), 2);
        a.release(t1);
        let (_, e) = admitted(a.admit(ip(4), ()));
        assert_eq!(e, None);
    }

    #[test]
    fn the_per_ip_limit_holds_and_never_evicts() {
        let mut a = Admission::new(Limits {
            max_open: 4,
            max_per_ip: 2,
        });
        let (t0, _) = admitted(a.admit(ip(2), 0));
        let (t1, _) = admitted(a.admit(ip(2), 1));
        // A third from the same address: refused, though slots are free.
        assert_eq!(a.admit(ip(2), 2), Verdict::RefusePerIp);
        let _ = admitted(a.admit(ip(3), 3));
        let _ = admitted(a.admit(ip(3), 4));
        // Full, and the address is at its limit: refused, not evicting its
        // own or anyone's.
        assert_eq!(a.admit(ip(2), 5), Verdict::RefusePerIp);
        assert_eq!(a.open(), 4);
        // Another address evicts the oldest (ip 2's first): ip 2 then has
        // room for one.
        let (_, e) = admitted(a.admit(ip(4), 6));
        assert_eq!(e, Some((t0, 0)));
        assert_eq!(a.open_from(ip(2)), 1);
        // Room again for ip 2, up to its bound: each newcomer evicts the
        // oldest (ip 2's own t1, then ip 3's first); a third is refused.
        let (_, e) = admitted(a.admit(ip(2), 7));
        assert_eq!(e, Some((t1, 1)));
        let (_, e) = admitted(a.admit(ip(2), 8));
        assert_eq!(e.map(|(_, p)| p), Some(3));
        assert_eq!(a.open_from(ip(2)), 2);
        assert_eq!(a.admit(ip(2), 9), Verdict::RefusePerIp);
        assert_eq!(a.open(), 4);
    }

    /// Any sequence of accepts, servings and releases keeps both bounds,
    /// and the counts agree with what is open.
    #[test]
    fn bounds_hold_over_a_long_mixed_run() {
        let limits = Limits {
            max_open: 16,
            max_per_ip: 3,
        };
        let mut a = Admission::new(limits);
        let mut live: Vec<Ticket> = Vec::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 4 {
                0 | 1 => {
                    if let Verdict::Admit { ticket, evicted } =
                        a.admit(ip((x >> 8) as u8 % 40), step)
                    {
                        if let Some((gone, _)) = evicted {
                            live.retain(|t| *t != gone);
                        }
                        live.push(ticket);
                    }
                }
                2 if !live.is_empty() => {
                    let t = live[(x >> 16) as usize % live.len()];
                    if x & (1 << 40) == 0 {
                        a.authenticated(t);
                    } else {
                        a.serving(t);
                    }
                }
                3 if !live.is_empty() => {
                    let t = live.swap_remove((x >> 16) as usize % live.len());
                    assert!(a.release(t).is_some());
                }
                _ => {}
            }
            assert_eq!(a.open(), live.len());
            assert!(a.unproven.len() + a.authenticated.len() <= a.open());
            assert!(a.open() <= limits.max_open);
            let per: usize = (0..40).map(|i| a.open_from(ip(i))).sum();
            assert_eq!(per, a.open());
            assert!((0..40).all(|i| a.open_from(ip(i)) <= limits.max_per_ip));
        }
    }
}
