"""Human renderings only: rich text for a terminal and markdown for a pull
request or ticket, of plans and their reviews (``text``), drift reports
(``drift``), apply results (``apply``) and all-clusters reports
(``multicluster``); ``words`` is how verdicts read. JSON documents live in
:mod:`quotaform.formats`."""
