//! The single-runner lock: one holder, token-checked release and extend, expiry.

use std::time::Duration;

use lawsync::lock::RunnerLock;
use lawsync_tests::servers::{Topology, unique_ns};

#[tokio::test]
async fn one_holder_token_checked_and_expiring() {
    for topo in Topology::ALL {
        let key = unique_ns("lock").drainer_lock();
        let a = RunnerLock::new(topo.connect().await, key.clone());
        let b = RunnerLock::new(topo.connect().await, key.clone());
        let held_a = a
            .try_acquire(Duration::from_millis(1000))
            .await
            .expect("acquire")
            .expect("free");
        assert!(
            b.try_acquire(Duration::from_secs(10))
                .await
                .expect("acquire")
                .is_none(),
            "{topo:?}: two holders"
        );
        assert!(
            a.extend(&held_a, Duration::from_millis(1000))
                .await
                .expect("extend")
        );
        tokio::time::sleep(Duration::from_millis(1300)).await;
        assert_eq!(
            a.holder_ttl().await.expect("ttl"),
            None,
            "{topo:?}: the lock must expire"
        );
        let held_b = b
            .try_acquire(Duration::from_secs(10))
            .await
            .expect("acquire")
            .expect("expired lock is free");
        // A's lock expired and B holds it now: A can neither extend nor release B's lock.
        assert!(
            !a.extend(&held_a, Duration::from_secs(60)).await.expect("extend"),
            "{topo:?}"
        );
        assert!(
            !a.release(held_a).await.expect("release"),
            "{topo:?}: a stale token released the lock"
        );
        assert!(
            b.holder_ttl()
                .await
                .expect("ttl")
                .is_some_and(|t| t > Duration::from_secs(5)),
            "{topo:?}"
        );
        assert!(b.release(held_b).await.expect("release"));
        assert_eq!(b.holder_ttl().await.expect("ttl"), None);
    }
}
