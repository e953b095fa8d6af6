"""An import hook that serves modules from their embedded text: an exported script whose library is an override
module of gdn-fuzz's own (a CPU stand-in, a mutant) carries that module and what it imports (fuzz.export.embed picks
them) and imports them under their own names. Standard library only: in the script it runs before any gdn-fuzz
module exists."""

import importlib.abc
import importlib.util
import linecache


class EmbeddedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """First on sys.meta_path: serves the embedded sources under their own module names (a dotted prefix of one is
    a package, empty where it has no source). Any other module of their top-level packages fails to import, so the
    script never runs gdn-fuzz code it does not carry, even where a gdn-fuzz is installed."""

    def __init__(self, sources: dict, where: str):
        self.sources, self.where = sources, where
        self.roots = {name.partition(".")[0] for name in sources}

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in self.roots:
            return None
        package = any(other.startswith(name + ".") for other in self.sources)
        if name not in self.sources and not package:
            raise ModuleNotFoundError(f"{name} is not embedded in this script", name=name)
        spec = importlib.util.spec_from_loader(name, self, origin=self.filename(name, package), is_package=package)
        spec.has_location = True  # __file__: tracebacks name the embedded file
        return spec

    def filename(self, name: str, package: bool) -> str:
        return f"{self.where}:{name.replace('.', '/')}{'/__init__' if package else ''}.py"

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        source, filename = self.sources.get(module.__name__, ""), module.__spec__.origin
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # traceback lines
        exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)
