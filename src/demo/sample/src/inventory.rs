//! Stock levels and reservations. A checkout reserves stock for fifteen minutes; an unpaid
//! reservation expires and its units return to the shelf.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a reservation holds stock.
pub const RESERVATION_TTL: Duration = Duration::from_secs(15 * 60);

#[derive(Debug)]
struct Reservation {
    sku: String,
    quantity: u32,
    expires: Instant,
}

/// Stock by SKU and the open reservations.
#[derive(Debug, Default)]
pub struct Inventory {
    stock: HashMap<String, u32>,
    reservations: HashMap<u64, Reservation>,
    next_id: u64,
}

#[derive(Debug, PartialEq)]
pub enum ReserveError {
    UnknownSku(String),
    OutOfStock { sku: String, available: u32 },
}

impl Inventory {
    pub fn restock(&mut self, sku: &str, quantity: u32) {
        *self.stock.entry(sku.to_string()).or_insert(0) += quantity;
    }

    /// Reserves units for a checkout; returns the reservation id.
    pub fn reserve(&mut self, sku: &str, quantity: u32, now: Instant) -> Result<u64, ReserveError> {
        self.expire(now);
        let available = *self
            .stock
            .get(sku)
            .ok_or_else(|| ReserveError::UnknownSku(sku.to_string()))?;
        if available < quantity {
            return Err(ReserveError::OutOfStock {
                sku: sku.to_string(),
                available,
            });
        }
        self.stock.insert(sku.to_string(), available - quantity);
        self.next_id += 1;
        self.reservations.insert(
            self.next_id,
            Reservation {
                sku: sku.to_string(),
                quantity,
                expires: now + RESERVATION_TTL,
            },
        );
        Ok(self.next_id)
    }

    /// Confirms a paid reservation: its units are sold.
    pub fn confirm(&mut self, id: u64) -> bool {
        self.reservations.remove(&id).is_some()
    }

    /// Returns the units of every expired reservation to the shelf.
    pub fn expire(&mut self, now: Instant) {
        let expired: Vec<u64> = self
            .reservations
            .iter()
            .filter(|(_, r)| r.expires <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            if let Some(r) = self.reservations.remove(&id) {
                *self.stock.entry(r.sku).or_insert(0) += r.quantity;
            }
        }
    }
}
