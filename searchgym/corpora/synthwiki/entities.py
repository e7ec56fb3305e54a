"""The entities of a synthwiki world and their facts (plain data, no behaviour)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["MONTHS", "PRESENT_YEAR", "City", "Country", "Date", "Org", "Person"]

#: The world's present: nobody is born, dies or founds anything after it.
PRESENT_YEAR = 2023

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")

Date = tuple[int, int, int]  # (year, month 1-12, day)


@dataclass(slots=True)
class Country:
    name: str
    continent: str
    part: str  # "northern", "western"... part of the continent
    capital: int = -1  # city index
    leader: int = -1  # person index of the first president
    independence: int = 0
    population_m: float = 0.0  # millions
    area: int = 0  # square kilometres
    rivers: list[str] = field(default_factory=list)


@dataclass(slots=True)
class City:
    name: str
    country: int
    settled: int
    population: int
    direction: str  # "the north of", "central"...
    river: str | None
    is_capital: bool = False


@dataclass(slots=True)
class Org:
    name: str
    core: str  # the invented word of the name, unique in the world
    kind: str  # a key of orgs.ORG_KINDS
    founder: int
    founded: int
    city: int
    style: int  # which naming pattern/detail variant was drawn


@dataclass(slots=True)
class Person:
    given: str
    surname: str
    female: bool
    birth: Date
    death: Date | None
    birthplace: int
    deathplace: int
    occupation: str
    university: int | None = None  # org index
    graduated: int = 0
    founded: list[int] = field(default_factory=list)  # org indices
    leads: int | None = None  # country index

    @property
    def name(self) -> str:
        return f"{self.given} {self.surname}"
