"""Tools of the default eval suite: small, deterministic and offline.

Every answer a task checks is computed from these tables, so a task is
checked on the tool's number, not on the model's arithmetic.
"""

from __future__ import annotations

from collections.abc import Mapping

from cortex_kernel.runtime.tools import tool

POPULATIONS = {
    "Paris": 2_102_650,
    "Marseille": 873_076,
    "Lyon": 520_774,
    "Toulouse": 504_078,
    "Nice": 348_085,
    "Lille": 236_710,
}

WEATHER = {
    "Paris": {"temp_c": 18, "sky": "cloudy"},
    "Lyon": {"temp_c": 15, "sky": "rainy"},
    "Nice": {"temp_c": 21, "sky": "sunny"},
    "Lille": {"temp_c": 12, "sky": "foggy"},
    "Toulouse": {"temp_c": 25, "sky": "clear"},
}

COUNTRIES = {"Kyoto": "Japan", "Porto": "Portugal", "Lyon": "France", "Cusco": "Peru"}
CAPITALS = {"Japan": "Tokyo", "Portugal": "Lisbon", "France": "Paris", "Peru": "Lima"}
RATES = {("EUR", "USD"): 1.08, ("USD", "EUR"): 0.925, ("EUR", "GBP"): 0.86}


def _known(table: Mapping[str, object], key: str, what: str) -> str:
    name = key.strip().title()
    if name not in table:
        raise KeyError(f"no {what} for {key!r}; known: {', '.join(table)}")
    return name


@tool
def population(city: str) -> int:
    """Population of a French city (census figure)."""
    return POPULATIONS[_known(POPULATIONS, city, "population data")]


@tool
def weather(city: str) -> dict[str, object]:
    """Current weather of a French city: temperature in Celsius and sky."""
    return dict(WEATHER[_known(WEATHER, city, "weather data")])


@tool
def to_fahrenheit(celsius: float) -> float:
    """Convert a temperature from Celsius to Fahrenheit."""
    return round(celsius * 9 / 5 + 32, 1)


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


@tool
def country_of(city: str) -> str:
    """The country a city is in."""
    return COUNTRIES[_known(COUNTRIES, city, "country")]


@tool
def capital_of(country: str) -> str:
    """The capital city of a country."""
    return CAPITALS[_known(CAPITALS, country, "capital")]


@tool
def exchange_rate(source: str, target: str) -> float:
    """How many units of currency `target` one unit of currency `source` buys (ISO codes)."""
    pair = (source.strip().upper(), target.strip().upper())
    if pair not in RATES:
        raise KeyError(f"no rate for {pair[0]}->{pair[1]}")
    return RATES[pair]


@tool
def stock_price(ticker: str) -> float:
    """Latest stock price of a ticker symbol, in US dollars."""
    raise ConnectionError(f"market data service unavailable (HTTP 503) for {ticker.upper()}")
