"""The data suite's DataFrames, and the values its checks expect computed from them.

:func:`namespace` makes the two DataFrames every task of ``data.yaml`` starts
with, from a fixed seed: ``sales`` (orders: date, region, product, units,
unit_price with missing prices) and ``customers`` (age and monthly_spend
with missing values, city, plan, churned). Each other function is one
task's expected value, computed with pandas from a fresh copy, so a task is
checked on the data, never on the model's arithmetic. The runner calls each
with the namespace's values its parameters name.

pandas and numpy (the ``test`` extra) are needed, and matplotlib for the
figure tasks: without them the suite does not load, and says so.
"""

from __future__ import annotations

import importlib
from typing import Any

#: The seed of the data: the same DataFrames on every run and machine.
SEED = 27

REGIONS = ["North", "South", "East", "West"]
PRODUCTS = ["A", "B", "C"]
CITIES = ["Lyon", "Nantes", "Lille", "Nice", "Rennes", "Dijon"]


def _libraries() -> tuple[Any, Any]:
    try:
        pd = importlib.import_module("pandas")
        np = importlib.import_module("numpy")
        importlib.import_module("matplotlib")
    except ImportError as exc:
        raise ImportError(
            f"the data suite needs pandas, numpy and matplotlib ({exc}); install them with "
            "pip install 'cortex-kernel[test]' (or pip install pandas matplotlib)"
        ) from None
    return pd, np


_libraries()  # on load: a suite that cannot run says so before any task starts


def namespace() -> dict[str, Any]:
    """A fresh ``{"sales": DataFrame, "customers": DataFrame}`` (seeded)."""
    pd, np = _libraries()
    rng = np.random.default_rng(SEED)
    orders = 240
    days = pd.date_range("2024-01-01", "2024-12-31", freq="D")
    prices = {"A": 12.5, "B": 30.0, "C": 74.0}
    product = rng.choice(PRODUCTS, orders)
    unit_price = np.array([prices[p] for p in product]) * rng.uniform(0.85, 1.15, orders)
    unit_price = unit_price.round(2)
    unit_price[rng.choice(orders, 14, replace=False)] = np.nan
    sales = pd.DataFrame(
        {
            "date": np.sort(rng.choice(days.to_numpy(), orders)),
            "region": rng.choice(REGIONS, orders, p=[0.34, 0.22, 0.26, 0.18]),
            "product": product,
            "units": rng.integers(1, 61, orders),
            "unit_price": unit_price,
        }
    )
    people = 150
    age = rng.integers(18, 76, people).astype(float)
    age[rng.choice(people, 11, replace=False)] = np.nan
    plan = rng.choice(["basic", "pro"], people, p=[0.65, 0.35])
    spend = rng.gamma(4.0, np.where(plan == "pro", 16.0, 11.0)).round(2)
    spend[rng.choice(people, 5, replace=False)] = np.nan
    churned = rng.random(people) < np.where(plan == "pro", 0.12, 0.3)
    customers = pd.DataFrame(
        {
            "customer_id": np.arange(1001, 1001 + people),
            "age": age,
            "city": rng.choice(CITIES, people),
            "plan": plan,
            "monthly_spend": spend,
            "churned": churned,
        }
    )
    return {"sales": sales, "customers": customers}


# -- counts -------------------------------------------------------------------


def north_orders(sales: Any) -> int:
    """Orders of the North region."""
    return int((sales["region"] == "North").sum())


def churned_customers(customers: Any) -> int:
    """Customers who churned."""
    return int(customers["churned"].sum())


# -- missing values -------------------------------------------------------------


def missing_prices(sales: Any) -> int:
    """Missing values of ``unit_price``."""
    return int(sales["unit_price"].isna().sum())


def most_missing_column(customers: Any) -> tuple[str, int]:
    """The column of ``customers`` with the most missing values, and how many."""
    counts = customers.isna().sum()
    return str(counts.idxmax()), int(counts.max())


# -- aggregates -----------------------------------------------------------------


def mean_age(customers: Any) -> float:
    """Mean age, missing ages left out."""
    return float(customers["age"].mean())


def march_units(sales: Any) -> int:
    """Units sold in March 2024."""
    return int(sales.loc[sales["date"].dt.month == 3, "units"].sum())


def median_spend(customers: Any) -> float:
    """Median ``monthly_spend`` (missing values left out)."""
    return float(customers["monthly_spend"].median())


# -- group-bys ------------------------------------------------------------------


def _revenue(sales: Any) -> Any:
    return (sales["units"] * sales["unit_price"]).groupby(sales["region"]).sum()


def top_region_revenue(sales: Any) -> tuple[str, float]:
    """The region with the highest revenue (units times unit_price), and that revenue."""
    revenue = _revenue(sales)
    return str(revenue.idxmax()), float(revenue.max())


def top_churn_city(customers: Any) -> tuple[str, float]:
    """The city with the highest churn rate, and the rate as a percentage."""
    rate = customers.groupby("city")["churned"].mean()
    return str(rate.idxmax()), float(rate.max() * 100)


def mean_units_by_product(sales: Any) -> list[float]:
    """Mean units per order of products A, B and C."""
    means = sales.groupby("product")["units"].mean()
    return [float(means[p]) for p in PRODUCTS]


# -- variables ------------------------------------------------------------------


def monthly_units(sales: Any) -> Any:
    """Total units per month, a Series indexed by month number."""
    return sales.groupby(sales["date"].dt.month)["units"].sum()


def big_orders(sales: Any) -> Any:
    """The orders with more than 50 units."""
    return sales[sales["units"] > 50]


# -- follow-ups -----------------------------------------------------------------


def top_region_share(sales: Any) -> float:
    """The top region's share of all revenue, as a percentage."""
    revenue = _revenue(sales)
    return float(revenue.max() / revenue.sum() * 100)


def spend_by_plan(customers: Any) -> Any:
    """Mean ``monthly_spend`` per plan."""
    return customers.groupby("plan")["monthly_spend"].mean()


def pro_minus_basic(customers: Any) -> float:
    """How much higher the pro plan's mean spend is than the basic plan's."""
    means = spend_by_plan(customers)
    return float(means["pro"] - means["basic"])
