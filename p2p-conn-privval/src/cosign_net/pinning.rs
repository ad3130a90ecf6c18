//! The pinning rule, sans-IO: who a cosigner talks to, decided from the
//! node ID the secret connection proved and the peer's hello.

use p2p_conn::NodeId;

use super::wire::Hello;
use super::{NetError, PROTOCOL_VERSION};

/// The cluster as one member sees it.
#[derive(Clone, Debug)]
pub(crate) struct Membership {
    pub cluster_id: [u8; 32],
    /// Our index.
    pub index: u16,
    /// Every member (us included): index and node ID.
    pub members: Vec<(u16, NodeId)>,
}

impl Membership {
    /// Our hello.
    pub(crate) fn hello(&self) -> Hello {
        Hello {
            cluster_id: self.cluster_id.to_vec(),
            index: u32::from(self.index),
            version: PROTOCOL_VERSION,
        }
    }

    /// The node ID of member `index`.
    pub(crate) fn node_id(&self, index: u16) -> Option<NodeId> {
        self.members
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, id)| *id)
    }

    /// Right after an accepted connection's handshake, before anything is
    /// read: the peer must be a member that dials us (a lower index).
    pub(crate) fn check_accepted(&self, remote: NodeId) -> Result<u16, NetError> {
        let Some(&(index, _)) = self.members.iter().find(|(_, id)| *id == remote) else {
            return Err(NetError::Stranger(remote));
        };
        if index >= self.index {
            // Ourselves, or a member we dial: it never dials us.
            return Err(NetError::WrongIndex {
                node_id: remote,
                claimed: u32::from(index),
            });
        }
        Ok(index)
    }

    /// The peer's hello, on a connection whose handshake proved `remote`
    /// and that is, from the handshake's check, member `expected`.
    pub(crate) fn check_hello(
        &self,
        remote: NodeId,
        expected: u16,
        hello: &Hello,
    ) -> Result<(), NetError> {
        if hello.version != PROTOCOL_VERSION {
            return Err(NetError::Version(hello.version));
        }
        if hello.cluster_id != self.cluster_id {
            return Err(NetError::WrongCluster(remote));
        }
        if hello.index != u32::from(expected) || self.node_id(expected) != Some(remote) {
            return Err(NetError::WrongIndex {
                node_id: remote,
                claimed: hello.index,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p2p_conn::Identity;

    fn cluster() -> (Membership, Vec<NodeId>) {
        let ids: Vec<NodeId> = (1..=3u8)
            .map(|i| Identity::from_seed(&[i; 32]).node_id())
            .collect();
        let m = Membership {
            cluster_id: [9; 32],
            index: 2,
            members: vec![(1, ids[0]), (2, ids[1]), (3, ids[2])],
        };
        (m, ids)
    }

    #[test]
    fn only_lower_members_are_accepted() {
        let (m, ids) = cluster();
        assert_eq!(m.check_accepted(ids[0]).unwrap(), 1);
        assert!(matches!(
            m.check_accepted(ids[1]),
            Err(NetError::WrongIndex { claimed: 2, .. })
        ));
        assert!(matches!(
            m.check_accepted(ids[2]),
            Err(NetError::WrongIndex { claimed: 3, .. })
        ));
        let stranger = Identity::from_seed(&[7; 32]).node_id();
        assert!(
            matches!(m.check_accepted(stranger), Err(NetError::Stranger(id)) if id == stranger)
        );
    }

    #[test]
    fn hello_must_match_cluster_version_and_index() {
        let (m, ids) = cluster();
        let mut hello = Hello {
            cluster_id: vec![9; 32],
            index: 1,
            version: PROTOCOL_VERSION,
        };
        m.check_hello(ids[0], 1, &hello).unwrap();
        // Member 3's key claiming index 1.
        assert!(matches!(
            m.check_hello(ids[2], 1, &hello),
            Err(NetError::WrongIndex { claimed: 1, .. })
        ));
        hello.index = 3;
        assert!(m.check_hello(ids[0], 1, &hello).is_err());
        hello.index = 1;
        hello.cluster_id = vec![8; 32];
        assert!(matches!(
            m.check_hello(ids[0], 1, &hello),
            Err(NetError::WrongCluster(_))
        ));
        hello.cluster_id = vec![9; 32];
        hello.version = PROTOCOL_VERSION + 1;
        assert!(matches!(
            m.check_hello(ids[0], 1, &hello),
            Err(NetError::Version(_))
        ));
    }
}
