//! Remote-signer round trips in one process: p2p-conn's `SignerClient`
//! (over a `NodeEndpoint`) and `SignerEndpoint` serving a `GuardedSigner`,
//! over loopback TCP (secret connection), with `--noise` libp2p Noise over
//! loopback TCP (`noise://`, both sides with keys of their own), or, with
//! `--unix`, a Unix socket (plaintext). The equivalent of `cometbft-peer
//! privval-bench`
//! (`interop/cometbft-go/privval_remote.go`), with the same workload and
//! the same JSON line, for `p2p-conn-lab/scripts/privval-rtt.sh`:
//!
//! ```text
//! privval-rtt [--n N] [--warmup W] [--unix | --noise] [--state slots|json]
//!             [--signer-thread | --split] [--no-persist] [--key PKCS11_URI]
//!             (default 2000, 200, slots, a fresh soft key)
//! privval-rtt --serve ADDR [--n N] [--warmup W] [--state slots|json]
//! ```
//!
//! With `--key pkcs11:...` the `GuardedSigner` signs with that key in a
//! PKCS#11 token (SoftHSM 2 in `privval-rtt.sh`) instead of a soft key.
//!
//! With `--serve ADDR` it is the signer alone, dialing a node elsewhere
//! (`cometbft-peer privval-bench -external`, CometBFT's own node side), and
//! prints every measured signature's time inside the signer, for
//! `privval-rtt.sh` to pair with that node's round trips: what a CometBFT
//! node sees of this signer.
//!
//! By default both endpoints run on one multi-thread runtime (two
//! workers). With `--signer-thread` the signer side runs on a
//! current-thread runtime of its own, on a dedicated thread, as the
//! endpoint module's docs suggest for a signer that blocks (this one syncs
//! its state file): the node side's tasks then never share a worker with
//! a blocked `fsync`. With `--split` each side has a current-thread
//! runtime on a thread of its own, as two processes would. With
//! `--no-persist` the signer signs the vote's sign
//! bytes with the same key but keeps no state (no guard, no file): an
//! experiment that takes the file system out of the measurement, never a
//! way to run a validator.
//!
//! W prevotes, then N measured, at increasing heights, each one
//! `SignerClient::sign_vote` call: its round trip (request written to
//! response decoded) and, separately, the time inside the signer's
//! `sign_vote` (a timing [`Signer`] around the `GuardedSigner`, whose state
//! file lives in a temporary folder: a slot file, one `fdatasync` per
//! signature, or with `--state json` a `priv_validator_state.json`, a new
//! file synced and renamed and the folder synced). Transport is the round trip minus the signing, per
//! request. Percentiles are nearest-rank, in microseconds.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use p2p_conn::Identity;
use p2p_conn_privval::endpoint::{Address, NodeEndpoint, SignerClient, SignerEndpoint};
use p2p_conn_privval::pkcs11::Pkcs11Key;
use p2p_conn_privval::{
    signed_msg_type, state_file, vote_sign_bytes, BlockId, CryptoPublicKey, GuardedSigner,
    PartSetHeader, Proposal, Signer, SignerError, Timestamp, Vote,
};

const CHAIN: &str = "bench-chain";

/// A [`Signer`] that records how long each `sign_vote` of `inner` takes.
struct TimedSigner<S> {
    inner: S,
    spent: Arc<Mutex<Vec<Duration>>>,
}

impl<S: Signer + ?Sized> Signer for TimedSigner<Box<S>> {
    fn public_key(&mut self, chain_id: &str) -> Result<CryptoPublicKey, SignerError> {
        self.inner.public_key(chain_id)
    }

    fn sign_vote(
        &mut self,
        chain_id: &str,
        vote: Vote,
        sign_extension: bool,
    ) -> Result<Vote, SignerError> {
        let start = Instant::now();
        let signed = self.inner.sign_vote(chain_id, vote, sign_extension);
        self.spent.lock().unwrap().push(start.elapsed());
        signed
    }

    fn sign_proposal(
        &mut self,
        chain_id: &str,
        proposal: Proposal,
    ) -> Result<Proposal, SignerError> {
        self.inner.sign_proposal(chain_id, proposal)
    }

    fn sign_bytes(&mut self, bytes: &[u8]) -> Result<Vec<u8>, SignerError> {
        self.inner.sign_bytes(bytes)
    }

    fn ping(&mut self) -> Result<(), SignerError> {
        self.inner.ping()
    }
}

/// `--no-persist`: the GuardedSigner's key over the vote's sign bytes,
/// through its unguarded `sign_bytes`; no state is checked or written.
struct Unguarded(GuardedSigner);

impl Signer for Unguarded {
    fn public_key(&mut self, chain_id: &str) -> Result<CryptoPublicKey, SignerError> {
        self.0.public_key(chain_id)
    }

    fn sign_vote(&mut self, chain_id: &str, mut vote: Vote, _: bool) -> Result<Vote, SignerError> {
        vote.signature = self.0.sign_bytes(&vote_sign_bytes(chain_id, &vote))?;
        Ok(vote)
    }

    fn sign_proposal(&mut self, _: &str, _: Proposal) -> Result<Proposal, SignerError> {
        Err(SignerError::Backend(
            "privval-rtt --no-persist signs votes only".into(),
        ))
    }

    fn sign_bytes(&mut self, bytes: &[u8]) -> Result<Vec<u8>, SignerError> {
        self.0.sign_bytes(bytes)
    }
}

/// The prevote privval-bench signs at `height`: round 0, a non-nil block ID
/// that differs per height, a 20-byte validator address.
fn prevote(height: i64) -> Vote {
    let mut hash = vec![0u8; 32];
    let mut parts = vec![0u8; 32];
    for (i, (h, p)) in hash.iter_mut().zip(parts.iter_mut()).enumerate() {
        *h = (height as u8) ^ (i as u8);
        *p = ((height >> 8) as u8) ^ (i as u8) ^ 0x5a;
    }
    let mut psh = PartSetHeader::default();
    psh.total = 1;
    psh.hash = parts;
    let mut block_id = BlockId::default();
    block_id.hash = hash;
    block_id.part_set_header = psh;
    let mut v = Vote::default();
    v.msg_type = signed_msg_type::PREVOTE;
    v.height = height;
    v.round = 0;
    v.block_id = block_id;
    v.timestamp = Timestamp::new(1_700_000_000 + height, 0);
    v.validator_address = vec![0; 20];
    v
}

/// Nearest-rank `q` quantile of `ds`, in microseconds.
fn percentile(ds: &[Duration], q: f64) -> u128 {
    if ds.is_empty() {
        return 0;
    }
    let mut s = ds.to_vec();
    s.sort_unstable();
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
    s[rank].as_micros()
}

struct Args {
    n: usize,
    warmup: usize,
    unix: bool,
    noise: bool,
    json_state: bool,
    signer_thread: bool,
    split: bool,
    no_persist: bool,
    /// `--serve ADDR`: only the signer, dialing a node elsewhere.
    serve: Option<String>,
    /// `--key URI`: a key in a PKCS#11 token.
    key: Option<String>,
}

fn parse_args() -> Args {
    let mut args = Args {
        n: 2000,
        warmup: 200,
        unix: false,
        noise: false,
        json_state: false,
        signer_thread: false,
        split: false,
        no_persist: false,
        serve: None,
        key: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut number = |name: &str| -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| usage(&format!("{name} takes a number")))
        };
        match a.as_str() {
            "--n" => args.n = number("--n"),
            "--warmup" => args.warmup = number("--warmup"),
            "--unix" => args.unix = true,
            "--noise" => args.noise = true,
            "--state" => match it.next().as_deref() {
                Some("slots") => args.json_state = false,
                Some("json") => args.json_state = true,
                other => usage(&format!("--state slots|json, not {other:?}")),
            },
            "--signer-thread" => args.signer_thread = true,
            "--serve" => args.serve = Some(it.next().unwrap_or_else(|| usage("--serve ADDR"))),
            "--split" => {
                args.split = true;
                args.signer_thread = true;
            }
            "--no-persist" => args.no_persist = true,
            "--key" => args.key = Some(it.next().unwrap_or_else(|| usage("--key PKCS11_URI"))),
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    if args.n == 0 {
        usage("--n must be at least 1");
    }
    args
}

/// `--serve ADDR`: the signer alone, dialing the node at ADDR (CometBFT's
/// `privval-bench -external`), until it has signed the warm-up and the
/// measured votes: every measured signature's time inside the signer, in
/// order, for the script to pair with the node's round trips.
async fn serve_only(
    args: &Args,
    node: &str,
    mut signer: TimedSigner<Box<dyn Signer + Send>>,
    spent: Arc<Mutex<Vec<Duration>>>,
) -> Result<String, Box<dyn std::error::Error>> {
    let endpoint = SignerEndpoint::new(node.parse()?, Identity::generate());
    let serving = tokio::spawn(async move {
        let _ = endpoint.run(&mut signer).await;
    });
    let want = args.warmup + args.n;
    let started = Instant::now();
    while spent.lock().unwrap().len() < want {
        if started.elapsed() > Duration::from_secs(120) {
            return Err("the node asked for fewer votes than --warmup + --n".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    serving.abort();
    let signs: Vec<Duration> = spent.lock().unwrap()[args.warmup..want].to_vec();
    let list: Vec<String> = signs.iter().map(|d| d.as_micros().to_string()).collect();
    Ok(format!(
        "{{\"n\":{},\"sign_p50_us\":{},\"sign_p99_us\":{},\"signs_us\":[{}]}}",
        args.n,
        percentile(&signs, 0.50),
        percentile(&signs, 0.99),
        list.join(",")
    ))
}

fn usage(msg: &str) -> ! {
    eprintln!(
        "privval-rtt: {msg}\nusage: privval-rtt [--n N] [--warmup W] [--unix | --noise] [--state slots|json] [--signer-thread | --split] [--no-persist] [--key PKCS11_URI] [--serve ADDR]"
    );
    std::process::exit(2);
}

fn main() {
    let args = parse_args();
    let dir = std::env::temp_dir().join(format!("p2p-conn-privval-rtt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temporary folder");
    // Multi-thread, as the endpoint docs ask of a signer that syncs files
    // on its task; two workers, like GOMAXPROCS on this machine's 2 cores.
    let rt = if args.split {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    }
    .expect("tokio runtime");
    let result = rt.block_on(run(&args, &dir));
    let _ = std::fs::remove_dir_all(&dir);
    match result {
        Ok(line) => println!("{line}"),
        Err(e) => {
            eprintln!("privval-rtt: {e}");
            std::process::exit(1);
        }
    }
}

async fn run(args: &Args, dir: &std::path::Path) -> Result<String, Box<dyn std::error::Error>> {
    let (state, format) = if args.json_state {
        ("priv_validator_state.json", state_file::Format::FilePv)
    } else {
        ("signer.state", state_file::Format::Slots)
    };
    let state = dir.join(state);
    state_file::write_new(&state, &Default::default(), format)?;
    let guarded = match &args.key {
        Some(uri) => GuardedSigner::open(Pkcs11Key::open(&uri.parse()?)?, &state)?,
        None => GuardedSigner::open(Identity::generate(), &state)?,
    }
    .with_chain_id(CHAIN);
    let spent = Arc::new(Mutex::new(Vec::with_capacity(args.n + args.warmup)));
    let inner: Box<dyn Signer + Send> = if args.no_persist {
        Box::new(Unguarded(guarded.allow_sign_bytes()))
    } else {
        Box::new(guarded)
    };
    let mut signer = TimedSigner {
        inner,
        spent: spent.clone(),
    };

    if let Some(node) = &args.serve {
        return serve_only(args, node, signer, spent).await;
    }
    let signer_id = Identity::generate();
    let listen = if args.unix {
        Address::unix(dir.join("privval.sock"))
    } else if args.noise {
        Address::noise(
            signer_id.public_key().peer_id(),
            "127.0.0.1:0".parse().expect("an address"),
        )
    } else {
        Address::tcp("127.0.0.1:0")
    };
    let node = NodeEndpoint::bind(&listen, Identity::generate())
        .await?
        .accept_timeout(Duration::from_secs(30));
    let endpoint = SignerEndpoint::new(node.address(), signer_id);
    let client = SignerClient::new(node);
    let serve = async move {
        let _ = endpoint.run(&mut signer).await;
    };
    // Dropping the sender stops the dedicated signer thread.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = if args.signer_thread {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::spawn(move || {
            rt.block_on(async {
                tokio::select! {
                    _ = serve => {}
                    _ = stopped => {}
                }
            })
        });
        None
    } else {
        Some(tokio::spawn(serve))
    };
    // The node side runs as a task, as CometBFT's SignerClient runs on a
    // goroutine: on the multi-thread runtime it then shares the workers
    // with the signer instead of waiting on `block_on`'s thread, a third
    // thread that every response would have to wake.
    let (warmup, n) = (args.warmup, args.n);
    let measure_spent = spent.clone();
    let measure = tokio::spawn(async move {
        client.wait_for_signer().await?;
        let mut height = 0i64;
        for _ in 0..warmup {
            height += 1;
            client.sign_vote(CHAIN, prevote(height), false).await?;
        }
        measure_spent.lock().unwrap().clear();
        let mut rtts = Vec::with_capacity(n);
        for _ in 0..n {
            height += 1;
            let v = prevote(height);
            let start = Instant::now();
            client.sign_vote(CHAIN, v, false).await?;
            rtts.push(start.elapsed());
        }
        Ok::<_, p2p_conn_privval::endpoint::EndpointError>(rtts)
    });
    let rtts = measure.await??;
    drop(stop);
    if let Some(task) = serving {
        task.abort();
    }
    let signs = std::mem::take(&mut *spent.lock().unwrap());
    if signs.len() != rtts.len() {
        return Err(format!(
            "{} round trips but {} sign_vote calls",
            rtts.len(),
            signs.len()
        )
        .into());
    }
    let transport: Vec<Duration> = rtts
        .iter()
        .zip(&signs)
        .map(|(r, s)| r.saturating_sub(*s))
        .collect();
    Ok(format!(
        concat!(
            r#"{{"n":{},"rtt_p50_us":{},"rtt_p99_us":{},"sign_p50_us":{},"sign_p99_us":{},"#,
            r#""transport_p50_us":{},"transport_p99_us":{},"warmup":{}}}"#
        ),
        args.n,
        percentile(&rtts, 0.50),
        percentile(&rtts, 0.99),
        percentile(&signs, 0.50),
        percentile(&signs, 0.99),
        percentile(&transport, 0.50),
        percentile(&transport, 0.99),
        args.warmup,
    ))
}
