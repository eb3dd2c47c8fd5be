"""Phase 1, capture: the source objects that record changes and what gluon owns of them.

Reading and deleting captured changes is in ``changelog``; planning, creating and dropping
the objects in ``objects``; finding what already exists and what is wrong with it in
``existing``; the ownership markers in ``ownership``.
"""
