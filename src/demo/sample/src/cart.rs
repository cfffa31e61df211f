//! The cart: lines of products and quantities, and the order total.

use crate::discount::{self, Customer};
use crate::shipping::{self, Zone};

/// One line of a cart.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub sku: String,
    pub quantity: u32,
    /// Unit price in cents.
    pub unit_price: u64,
    /// Weight of one unit in grams.
    pub unit_grams: u32,
}

/// A customer's cart.
#[derive(Debug, Default)]
pub struct Cart {
    lines: Vec<Line>,
    promotion: Option<String>,
}

/// The total of an order, itemised for the receipt.
#[derive(Debug, Clone, PartialEq)]
pub struct Total {
    pub subtotal: u64,
    pub discount: u64,
    pub shipping: u64,
    pub total: u64,
}

impl Cart {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `quantity` units of a product; the same SKU twice merges into one line.
    pub fn add_item(&mut self, sku: &str, quantity: u32, unit_price: u64, unit_grams: u32) {
        if let Some(line) = self.lines.iter_mut().find(|l| l.sku == sku) {
            line.quantity += quantity;
            return;
        }
        self.lines.push(Line {
            sku: sku.to_string(),
            quantity,
            unit_price,
            unit_grams,
        });
    }

    /// Removes a product; returns whether it was in the cart.
    pub fn remove_item(&mut self, sku: &str) -> bool {
        let before = self.lines.len();
        self.lines.retain(|l| l.sku != sku);
        before != self.lines.len()
    }

    /// Remembers a promotion code; it is checked when the total is computed.
    pub fn apply_promotion(&mut self, code: &str) {
        self.promotion = Some(code.to_uppercase());
    }

    pub fn lines(&self) -> &[Line] {
        &self.lines
    }

    fn subtotal(&self) -> u64 {
        self.lines
            .iter()
            .map(|l| l.unit_price * u64::from(l.quantity))
            .sum()
    }

    fn weight_grams(&self) -> u32 {
        self.lines.iter().map(|l| l.unit_grams * l.quantity).sum()
    }

    /// The order total: subtotal, minus the loyalty discount and any promotion (the larger of
    /// the two, never both), plus shipping to `zone`. Shipping is free above 50 euros after the
    /// discount.
    pub fn total(&self, customer: &Customer, zone: Zone) -> Total {
        let subtotal = self.subtotal();
        let loyalty = discount::loyalty_discount(customer, subtotal);
        let promotion = self
            .promotion
            .as_deref()
            .map_or(0, |code| discount::promotion_discount(code, subtotal));
        let discount = loyalty.max(promotion);
        let discounted = subtotal - discount;
        let shipping = if discounted >= 5_000 {
            0
        } else {
            shipping::quote(self.weight_grams(), zone)
        };
        Total {
            subtotal,
            discount,
            shipping,
            total: discounted + shipping,
        }
    }
}
