//! Card payments through the payment provider, with retries and idempotency keys so a retried
//! charge is never taken twice.

use std::time::Duration;

/// Attempts of one charge before giving up.
pub const MAX_ATTEMPTS: u32 = 4;

#[derive(Debug, Clone, PartialEq)]
pub enum ChargeError {
    /// The card was declined; retrying will not help.
    Declined(String),
    /// The provider did not answer in time; the charge may be retried with the same key.
    Timeout,
    /// Every attempt failed.
    GaveUp { attempts: u32 },
}

/// The provider's side of a charge (a real client, or a fake in tests).
pub trait Provider {
    fn charge(&mut self, key: &str, cents: u64, card_token: &str) -> Result<String, ChargeError>;
}

/// The wait before attempt `attempt` (0-based): 200 ms doubled each time, at most 5 s.
pub fn backoff(attempt: u32) -> Duration {
    let millis = 200u64.saturating_mul(1 << attempt.min(10));
    Duration::from_millis(millis.min(5_000))
}

/// Charges `cents` to a card, retrying timeouts with exponential backoff under one idempotency
/// key (the order id), so the provider takes the money at most once.
pub fn charge_with_retry(
    provider: &mut dyn Provider,
    order_id: &str,
    cents: u64,
    card_token: &str,
    sleep: &mut dyn FnMut(Duration),
) -> Result<String, ChargeError> {
    let key = format!("order-{order_id}");
    for attempt in 0..MAX_ATTEMPTS {
        match provider.charge(&key, cents, card_token) {
            Ok(receipt) => return Ok(receipt),
            Err(ChargeError::Timeout) => sleep(backoff(attempt)),
            Err(other) => return Err(other),
        }
    }
    Err(ChargeError::GaveUp {
        attempts: MAX_ATTEMPTS,
    })
}
