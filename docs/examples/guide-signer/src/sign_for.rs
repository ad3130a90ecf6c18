// Generated from a Rust block of docs/library-guide.md; edit the document.
use std::time::Duration;

use p2p_conn_privval::endpoint::{Address, SignerEndpoint, SignerEvent};
use p2p_conn_privval::{load_validator_key, GuardedSigner};

async fn sign_for(node: &str) -> Result<(), Box<dyn std::error::Error>> {
    let key = load_validator_key("priv_validator_key.json")?;
    // Refuses double signs; the state is on disk before a signature leaves.
    let mut signer =
        GuardedSigner::open(key, "priv_validator_state.json")?.with_chain_id("my-testnet");
    let endpoint = SignerEndpoint::new(node.parse::<Address>()?, p2p_conn::Identity::generate())
        .on_event(|e| {
            if let SignerEvent::Disconnected { reason } = e {
                eprintln!("lost the node ({reason}); dialing again");
            }
        });
    let stats = endpoint.stats();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(10)).await;
            eprintln!("{}", stats.snapshot()); // per kind: count, errors, p50/p99
        }
    });
    // Runs until dropped; it returns only for an invalid configuration.
    match endpoint.run(&mut signer).await {
        Ok(never) => match never {},
        Err(e) => Err(e.into()),
    }
}
