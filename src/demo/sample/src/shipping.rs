//! Shipping quotes by parcel weight and destination zone.

/// Destination zones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    Domestic,
    Europe,
    World,
}

/// Base price and price per started kilogram, in cents, for a zone.
fn rates(zone: Zone) -> (u64, u64) {
    match zone {
        Zone::Domestic => (390, 80),
        Zone::Europe => (890, 150),
        Zone::World => (1_990, 400),
    }
}

/// The shipping price of a parcel of `grams` to `zone`: the base price plus the rate for each
/// started kilogram beyond the first.
pub fn quote(grams: u32, zone: Zone) -> u64 {
    let (base, per_kilogram) = rates(zone);
    let kilograms = u64::from(grams.div_ceil(1_000));
    base + per_kilogram * kilograms.saturating_sub(1)
}

/// Parcels heavier than this go by freight and are quoted by hand.
pub const MAX_PARCEL_GRAMS: u32 = 30_000;

/// Whether a parcel can be shipped at the automatic rates.
pub fn shippable(grams: u32) -> bool {
    grams <= MAX_PARCEL_GRAMS
}
