"""Reading the lake: sessions with every view registered, and `gluon query`."""
