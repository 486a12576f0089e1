"""An import-linter contract type the library lacks: "no module of these packages, except the
listed ones, imports X".

The cores of the services may not import a web framework, while their ``app`` and ``api``
modules must: a ``forbidden`` contract would need every core module listed by hand (and would not
notice a new one), a ``protected`` one checks direct imports only. ``forbidden_outside`` takes
every module of ``containers`` that is not (in) one of ``allowed_modules`` as a source of a
``forbidden`` contract, so import chains through other modules count as well, and reports
broken chains the way ``forbidden`` does. Registered under ``contract_types`` in pyproject.toml.
"""

from __future__ import annotations

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.domain.helpers import module_expressions_to_modules
from importlinter.domain.imports import ModuleExpression


class ForbiddenOutsideContract(Contract):
    """Every module of ``containers`` outside ``allowed_modules`` (each taken as a package) must
    not import ``forbidden_modules``, directly or through other modules."""

    type_name = "forbidden_outside"

    containers = fields.SetField(subfield=fields.ModuleExpressionField())
    allowed_modules = fields.SetField(subfield=fields.ModuleExpressionField())
    forbidden_modules = fields.SetField(subfield=fields.ModuleExpressionField())
    broken_contract_guidance = fields.TextField(required=False)

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        containers: set[ModuleExpression] = self.containers  # type: ignore[assignment]
        allowed_expressions: set[ModuleExpression] = self.allowed_modules  # type: ignore[assignment]
        # An allowed module that names nothing is a typo that would silently widen the contract.
        allowed = {
            module.name
            for module in module_expressions_to_modules(
                graph, allowed_expressions, as_packages=True, raise_if_unmatched=True
            )
        }
        sources: set[str] = set()
        for container in module_expressions_to_modules(graph, containers, raise_if_unmatched=True):
            sources.add(container.name)
            sources |= graph.find_descendants(container.name)
        options = {
            "source_modules": sorted(sources - allowed),
            "forbidden_modules": self.contract_options["forbidden_modules"],
            # Each source on its own: a container's __init__ must not stand for its allowed parts.
            "as_packages": "false",
        }
        if "broken_contract_guidance" in self.contract_options:
            options["broken_contract_guidance"] = self.contract_options["broken_contract_guidance"]
        self._forbidden = ForbiddenContract(self.name, self.session_options, options)
        return self._forbidden.check(graph, verbose)

    def render_broken_contract(self, check: ContractCheck) -> None:
        self._forbidden.render_broken_contract(check)
