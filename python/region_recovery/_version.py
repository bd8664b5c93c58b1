# The one version of the project: the Python package and the plugin jar (build.sbt reads this line).
__version__ = "0.1.0"
