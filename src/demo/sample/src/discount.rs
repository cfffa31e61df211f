//! Discounts: loyalty tiers earned by past spending, and promotion codes.

/// What the discount rules know about a customer.
#[derive(Debug, Clone, PartialEq)]
pub struct Customer {
    pub id: u64,
    /// Spending over the last twelve months, in cents.
    pub yearly_spend: u64,
    pub employee: bool,
}

/// Loyalty tiers by yearly spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    Standard,
    Silver,
    Gold,
}

/// The tier a customer's yearly spend earns: silver from 500 euros, gold from 2000 euros.
pub fn tier(customer: &Customer) -> Tier {
    match customer.yearly_spend {
        s if s >= 200_000 => Tier::Gold,
        s if s >= 50_000 => Tier::Silver,
        _ => Tier::Standard,
    }
}

/// The loyalty discount on `subtotal` in cents: 5% for silver, 10% for gold, 15% for
/// employees whatever their tier. Rounded down to whole cents.
pub fn loyalty_discount(customer: &Customer, subtotal: u64) -> u64 {
    let percent = if customer.employee {
        15
    } else {
        match tier(customer) {
            Tier::Gold => 10,
            Tier::Silver => 5,
            Tier::Standard => 0,
        }
    };
    subtotal * percent / 100
}

/// The discount a promotion code gives on `subtotal`, or 0 for an unknown or expired code.
pub fn promotion_discount(code: &str, subtotal: u64) -> u64 {
    match code {
        "WELCOME10" => subtotal / 10,
        "FREESHIP" => 0,
        "SPRING5" if subtotal >= 3_000 => 500,
        _ => 0,
    }
}
